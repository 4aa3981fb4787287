"""The one sentence splitter of the package, and clauses and questions read from its sentences."""

from __future__ import annotations

import re

from llama_index_memory_hierarchy.language.scripts import HAN

# After . ! ? a space ends a sentence, or a Han character (Chinese puts no space after them); after 。！？ nothing
# need follow; a line break always ends one.
_SENTENCE = re.compile(rf"(?<=[.!?])(?:\s+|(?=[{HAN}]))|(?<=[。！？])\s*|\n+")
# The same, with semicolons as sentence ends: rules and facts are often listed with them ("不要用表情；回答简短").
_SENTENCE_OR_SEMICOLON = re.compile(rf"(?<=[.!?;；])(?:\s+|(?=[{HAN}]))|(?<=[。！？；])\s*|\n+")
#: Where clauses end: at sentences' ends and commas, semicolons and colons.
_CLAUSE_END = re.compile(r"(?<=[.!?。！？,，;；:：])\s*|\n+")
_QUESTION_END = re.compile(r"[?？][\s\"'”’）)]*$")


def split_sentences(text: str, *, semicolons: bool = False) -> list[str]:
    """Sentences of ``text`` (split after . ! ? and 。！？, and at line breaks), stripped, non-empty.

    A full stop splits only before a space or a Han character, so "3.5" and "v1.2" stay whole. ``semicolons``:
    a semicolon ends a sentence too (for lists of rules or facts).
    """
    pattern = _SENTENCE_OR_SEMICOLON if semicolons else _SENTENCE
    return [s.strip() for s in pattern.split(text) if s and s.strip()]


def sentence_ends(text: str) -> list[int]:
    """Where the sentences of ``text`` end (the offset just after each one's closing mark), by the same rule."""
    return [m.start() for m in _SENTENCE.finditer(text) if m.start() > 0]


def split_clauses(text: str) -> list[str]:
    """Clauses of ``text``: split at sentences' ends, commas, semicolons, colons and line breaks (not stripped)."""
    return [c for c in _CLAUSE_END.split(text) if c.strip()]


def is_question(sentence: str) -> bool:
    """Whether ``sentence`` ends with a question mark (closing quotes and brackets aside)."""
    return bool(_QUESTION_END.search(sentence))


def asks(text: str) -> bool:
    """Whether ``text`` asks a question (one of its sentences is one): the turn after it may be the answer."""
    return any(is_question(s) for s in split_sentences(text))
