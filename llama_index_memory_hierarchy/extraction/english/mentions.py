"""What the tokens of one parsed spaCy ``Doc`` name: the user, people, things; and a fact made of two mentions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index_memory_hierarchy.extraction.base import (
    CONFIDENCE_PATTERN,
    ExtractedEntity,
    ExtractedFact,
    clean_name,
    make_fact,
)
from llama_index_memory_hierarchy.extraction.english.model import common_word
from llama_index_memory_hierarchy.extraction.english.words import (
    CODE,
    OBJECT_PREPS,
    SKIP_ENTITY_TYPES,
    VAGUE_HEADS,
    VAGUE_OBJECTS,
)
from llama_index_memory_hierarchy.extraction.relations import (
    NAME_PREDICATE,
    ORG_PREDICATES,
    PLACE_PREDICATES,
    USER_ENTITY,
    normalize_predicate,
)
from llama_index_memory_hierarchy.language import FIRST_PERSON, THIRD_PERSON


class Mentions:
    """The mentions of one parsed ``Doc``: its entities, the people named so far and whether it speaks of
    "the user" in the third person."""

    NAME = "spacy"

    def __init__(self, doc: Any) -> None:
        self.doc = doc
        self.ent_of: dict[int, Any] = {}
        ents = []
        for ent in doc.ents:
            if ent.label_ in SKIP_ENTITY_TYPES and CODE.match(ent.text):  # "A321" is a model, not a date
                ent = doc.char_span(ent.start_char, ent.end_char, label="PRODUCT") or ent
            ents.append(ent)
            for token in ent:
                self.ent_of[token.i] = ent
        self.ents = ents
        self.people: list[str] = []
        #: The sentence speaks of "the user" in the third person: its "I" and "me" are someone else (an agent).
        self.reported = False
        #: The name the user gave in this text ("I'm Sofia. Sofia lives in Athens": the second Sofia is the user).
        self.user_names: set[str] = set()

    @staticmethod
    def _the_user(token: Any) -> bool:
        """ "the user" (an MCP client's or an agent's way of naming the person the memory belongs to)."""
        return token.lower_ == "user" and any(c.dep_ == "det" and c.lower_ == "the" for c in token.children)

    def _user(self, token: Any) -> bool:
        return (token.lower_ in FIRST_PERSON and not self.reported) or self._the_user(token)

    def named(self, token: Any) -> tuple[str, str] | None:
        """The name a token stands for (the user, a resolvable he/she, or a proper noun)."""
        low = token.lower_
        if self._user(token):
            return USER_ENTITY, "PERSON"
        if low in FIRST_PERSON:
            return None
        if token.text in self.user_names:
            return USER_ENTITY, "PERSON"
        if low in THIRD_PERSON:
            return (self.people[-1], "PERSON") if len(set(self.people)) == 1 else None
        if token.pos_ in {"PRON", "DET"}:
            return None
        appos = self._named_appos(token)
        if appos is not None:
            token = appos
        ent = self.ent_of.get(token.i)
        if ent is not None:
            if ent.label_ in SKIP_ENTITY_TYPES or ent.root.pos_ != "PROPN":
                return None
            title = self.doc[ent.start - 1] if ent.start > 0 else None
            if title is not None and title.lower_.rstrip(".") in {"mr", "mrs", "ms", "dr", "prof", "miss"}:
                return f"{title.text} {ent.text}", "PERSON"
            return ent.text, "PERSON" if ent.label_ == "PERSON" else "ENTITY"
        if token.dep_ == "nsubj" and token.pos_ in {"ADJ", "NOUN"} and self._unknown_title(token):
            return token.text, "PERSON"  # "Luca works at Ducati": a first name the small model tags an adjective
        if token.pos_ == "PROPN":
            return self._join(
                [t for t in token.lefts if t.dep_ in {"compound", "flat"} and t.pos_ == "PROPN"]
                + [token, *[t for t in token.rights if t.dep_ in {"flat", "compound"}]]
            ), "ENTITY"
        return None

    def thing(self, token: Any, *, allow_dates: bool = False) -> tuple[str, str] | None:
        """An object: a name, or a whole noun phrase without its determiner ("weekly Excel sales report")."""
        low = token.lower_
        if self._user(token):
            return USER_ENTITY, "PERSON"
        if low in FIRST_PERSON:
            return None
        if token.pos_ in {"PRON", "DET", "SCONJ", "ADP", "PART", "PUNCT", "AUX"} or low in THIRD_PERSON:
            return None
        ent = self.ent_of.get(token.i)
        if (
            ent is not None
            and ent.label_ in SKIP_ENTITY_TYPES
            and not allow_dates
            and (ent.label_ in {"DATE", "TIME"} or token.pos_ != "NOUN")
        ):
            return None
        if ent is not None and ent.label_ in {"DATE", "TIME"} and allow_dates:
            return ent.text, "CONCEPT"
        if ent is not None and ent.root.i == token.i and ent.label_ not in SKIP_ENTITY_TYPES:
            lefts = [t for t in token.lefts if t.dep_ == "compound" and t.pos_ == "PROPN" and t.i < ent.start]
            words = [*lefts, *ent, *self._prep_words(token)]
            return self._join(words), "PERSON" if ent.label_ == "PERSON" and len(words) == len(ent) else "ENTITY"
        if token.pos_ == "PROPN" and ent is None:
            return self.named(token)
        words = self._noun_words(token) if token.pos_ != "VERB" else self._gerund_words(token)
        if not words:
            return None
        text = self._join(words)
        if text.lower() in VAGUE_OBJECTS or any(
            w.lower_ in {"same", "other", "such"} or w.lower_ in VAGUE_HEADS for w in words
        ):
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
            if child.dep_ == "prep" and child.lower_ in OBJECT_PREPS:
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
    def _unknown_title(token: Any) -> bool:
        """A lone capitalised word that is no English word WordNet knows: a name."""
        return (
            token.is_title
            and token.is_alpha
            and not any(c.dep_ in {"det", "amod", "compound", "poss"} for c in token.children)
            and not common_word(token.lower_)
        )

    @staticmethod
    def _named_appos(token: Any) -> Any | None:
        """ "My sister Jane": the proper-noun apposition a common noun stands for."""
        if token.pos_ != "NOUN":
            return None
        for child in token.children:
            if child.dep_ == "appos" and child.pos_ == "PROPN":
                return child
        return None

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
        if canonical in PLACE_PREDICATES:
            object_type = "PLACE"
        elif canonical in ORG_PREDICATES:
            object_type = "ORG"
        if canonical.endswith("_of") or canonical in {"spouse", "married_to", NAME_PREDICATE}:
            subject_type = "PERSON" if subject_type == "ENTITY" else subject_type
        return make_fact(subj[0], canonical, obj[0], confidence, self.NAME, subject_type, object_type)

    def entities(self, facts: Sequence[ExtractedFact]) -> list[ExtractedEntity]:
        found: dict[str, ExtractedEntity] = {}
        for ent in self.ents:
            if ent.label_ not in SKIP_ENTITY_TYPES and clean_name(ent.text):
                found.setdefault(
                    clean_name(ent.text).lower(), ExtractedEntity(name=clean_name(ent.text), type=ent.label_)
                )
        for fact in facts:
            found.setdefault(fact.subject.lower(), ExtractedEntity(name=fact.subject, type=fact.subject_type))
            if fact.object_type != "CONCEPT":
                found.setdefault(fact.object.lower(), ExtractedEntity(name=fact.object, type=fact.object_type))
        return list(found.values())
