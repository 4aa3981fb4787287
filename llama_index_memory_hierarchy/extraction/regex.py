"""English without spaCy: capitalised phrases as entities and three sure patterns as facts."""

from __future__ import annotations

import re

from llama_index_memory_hierarchy.extraction.base import (
    CONFIDENCE_REGEX,
    ExtractedEntity,
    ExtractedFact,
    Extraction,
    clean_name,
    make_fact,
    unique_facts,
)
from llama_index_memory_hierarchy.extraction.relations import RELATION_NOUNS, USER_ENTITY
from llama_index_memory_hierarchy.language import split_sentences

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


def caps_extract(text: str) -> Extraction:
    """Without spaCy: capitalised names as entities and three sure patterns as facts (no negated sentence)."""
    entities: dict[str, ExtractedEntity] = {}
    facts: list[ExtractedFact | None] = []
    for sentence in split_sentences(text):
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
                facts.append(
                    make_fact(subject, relation, match.group("o"), CONFIDENCE_REGEX, "regex", "ENTITY", "ENTITY")
                )
    return Extraction(entities=list(entities.values()), facts=unique_facts(facts))
