"""English facts clause by clause: which clauses state a fact (no question, conditional, hedge or negation
lost) and which shape reads it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index_memory_hierarchy.extraction.base import ExtractedFact, Extraction, unique_facts
from llama_index_memory_hierarchy.extraction.english.model import common_word
from llama_index_memory_hierarchy.extraction.english.shapes import FactShapes
from llama_index_memory_hierarchy.extraction.english.words import (
    BARE_USER,
    CALL_ME,
    CONDITIONAL_MARKS,
    DISCOURSE_OPENER,
    GREETINGS,
    HEDGES,
    HYPOTHETICAL_MODALS,
    IDENTITY_WORDS,
    LABEL_VALUE,
    NAME_CONTRACTION,
    REQUEST_VERBS,
    SINGLE_CLAUSE_MARKS,
    TRANSIENT_ADJECTIVES,
)
from llama_index_memory_hierarchy.extraction.relations import NAME_PREDICATE, USER_ENTITY
from llama_index_memory_hierarchy.language import THIRD_PERSON


class SpacyReader(FactShapes):
    """Clause-by-clause facts over one parsed spaCy ``Doc`` (see :mod:`llama_index_memory_hierarchy.extraction`
    for the rules)."""

    def facts(self) -> list[ExtractedFact]:
        out: list[ExtractedFact | None] = []
        for sent in self.doc.sents:
            self.reported = any(self._the_user(t) for t in sent)
            introduction = self._introduction(sent)
            if introduction is not None:
                out.append(introduction)
            elif not self._skip_sentence(sent):
                out.extend(self._relation_nouns(sent))
                for token in sent:
                    if (
                        token.dep_ in {"ROOT", "conj", "advcl", "parataxis"} or self._before_so(token)
                    ) and token.pos_ in {"VERB", "AUX"}:
                        out.extend(self._clause(token))
            for ent in sent.ents:
                if ent.label_ == "PERSON":
                    self.people.append(ent.text)
        return unique_facts(out)

    def _introduction(self, sent: Any) -> ExtractedFact | None:
        """ "I'm Greta." / "hi, I'm Tariq!": the whole sentence gives the user's name (small models often tag a
        lone first name as an adjective or organisation); nationalities and states ("I'm Italian") are not names."""
        words = [t for t in sent if not t.is_punct]
        while words and words[0].lower_ in GREETINGS:
            words = words[1:]
        if len(words) not in {3, 4} or words[0].lower_ != "i" or words[1].lower_ not in {"am", "'m", "’m", "m"}:
            return None
        name = words[2:]
        if any(not t.is_title or t.lower_ in TRANSIENT_ADJECTIVES for t in name):
            return None
        if len(name) == 1 and name[0].lower_ in IDENTITY_WORDS:  # "I'm Vegan.": what the user is
            return self._make((USER_ENTITY, "PERSON"), "is", (name[0].lower_, "CONCEPT"))
        if any(t.i in self.ent_of and self.ent_of[t.i].label_ in {"NORP", "LANGUAGE", "GPE"} for t in name):
            return None
        person = all(t.i in self.ent_of and self.ent_of[t.i].label_ == "PERSON" for t in name)
        known = common_word(name[-1].lower_)
        if known & {"adj", "verb", "adv"} or (known and not person):
            return None  # "I'm Retired.": a common word capitalised, not a name
        text = " ".join(t.text for t in name)
        self.user_names.update({text, name[0].text})
        return self._make((USER_ENTITY, "PERSON"), NAME_PREDICATE, (text, "PERSON"))

    @staticmethod
    def _before_so(token: Any) -> bool:
        """ "My aunt lives in Hull, so I visit": small models make the first clause a complement of the second."""
        return token.dep_ == "ccomp" and any(
            c.lower_ == "so" and c.dep_ in {"advmod", "mark", "cc"} and token.i < c.i < token.head.i
            for c in token.head.children
        )

    @staticmethod
    def _skip_sentence(sent: Any) -> bool:
        """Questions and conditionals state no fact."""
        if "?" in sent.text:
            return True
        return any(t.dep_ == "mark" and t.lower_ in CONDITIONAL_MARKS for t in sent)

    def _subject_token(self, verb: Any) -> Any | None:
        subjects = [c for c in verb.children if c.dep_ in {"nsubj", "nsubjpass"}]
        if len(subjects) == 2 and self._misparsed_appos(subjects[1]):
            return subjects[1]  # "My cousin Mira lives in Split": Mira lives there
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
            if child.dep_ == "aux" and child.lower_ in HYPOTHETICAL_MODALS:
                return True
            if child.dep_ == "advmod" and child.lower_ in HEDGES:
                return True
            if child.dep_ in {"mark", "advmod"} and child.lower_ in SINGLE_CLAUSE_MARKS and child.i < verb.i:
                return True
        if verb.dep_ == "conj" and verb.head is not verb:
            return self._uncertain(verb.head) and not any(c.dep_ == "nsubj" for c in verb.children)
        return False

    def _clause(self, verb: Any) -> list[ExtractedFact | None]:
        subject_token = self._subject_token(verb)
        if subject_token is None or self._uncertain(verb):
            return []
        negated = self._negated(verb)
        naming = self._passive_name(verb, subject_token, negated)
        if naming is not None:
            return naming
        subject = self.named(subject_token)
        if subject is None and verb.lemma_.lower() in REQUEST_VERBS:  # "My boss told me to call the supplier"
            return self._verb((subject_token.text, "ENTITY"), verb, negated, prefix=None)
        if subject is None:
            found = self._possessive_subject(verb, subject_token, negated)
            if not found and not negated and self._kin(subject_token) is not None:
                return self._kin_clause(verb, subject_token)
            return found
        if subject[0] != USER_ENTITY and subject_token.lower_ not in THIRD_PERSON:
            self.people.append(subject[0])
        if verb.lemma_ == "be" and not any(c.dep_ == "acomp" and c.tag_ == "VBN" for c in verb.children):
            return self._copula(subject, verb, negated)
        hyphen = self._hyphenated(verb) if any(c.dep_ == "auxpass" for c in verb.children) else None
        if hyphen is not None:  # "Carol is left-handed", parsed as a passive verb by small models
            return [self._make(subject, "is_not" if negated else "is", (hyphen, "CONCEPT"))]
        return self._verb(subject, verb, negated, prefix=None)


def plain(text: str) -> str:
    """The text without content-free openers ("fwiw", "just so you know,"), with "my name's" spelled out, a
    terse note's forms ("User ...", "label: value", "call me X") spelled as sentences, and a final full stop,
    which small parsers need (else the opener or "paramedic" is read as an adjective)."""
    text = NAME_CONTRACTION.sub(r"\1 name is", DISCOURSE_OPENER.sub(r"\1", text)).rstrip()
    text = BARE_USER.sub(r"\1The user", text)
    text = CALL_ME.sub(r"\1My name is \2", text)
    text = LABEL_VALUE.sub(r"\1\2 is ", text)
    return f"{text}." if text[-1:].isalnum() else text  # a chat line without its full stop parses worse


def spacy_extract(nlp: Any, texts: Sequence[str]) -> list[Extraction]:
    results = []
    for doc in nlp.pipe([plain(t) for t in texts], batch_size=32):
        reader = SpacyReader(doc)
        facts = reader.facts()
        results.append(Extraction(entities=reader.entities(facts), facts=facts))
    return results
