"""A memory the search ranks: its signals as they are worked out, and what ranking reads from its text."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from llama_index_memory_hierarchy.calibration import group_of
from llama_index_memory_hierarchy.language import asks, query_stopwords, statements, stemmed, without_self_statements
from llama_index_memory_hierarchy.ranking.pipeline import has_time_expression, light_stem
from llama_index_memory_hierarchy.ranking.selection import information_words, normalised_text
from llama_index_memory_hierarchy.text import index_terms, keyword_tokens
from llama_index_memory_hierarchy.types import MemoryItem


@dataclass
class Candidate:
    """A memory the search ranks: its query-independent signals are set when its row is read (``search.admit``),
    the rest (dense, keyword, graph, entity) once every candidate is known."""

    item: MemoryItem
    vector: np.ndarray | None = None
    indexed: str = ""  # the terms its keyword index holds, its context included
    dense: float = 0.0
    keyword: float = 0.0
    cross_modal: float = 0.0
    graph: float = 0.0
    when: float = 0.0  # the time prior: its time against the query's hints, and a time it names for *when*
    fresh: float = 0.0  # recency
    own: float = 0.0  # the IDF-weighted share of the query's terms in its own text (what it states itself)
    matched: frozenset[str] = frozenset()  # those terms (``retrieval.floor`` counts the content words among them)
    evidence: float = 1.0  # how much its tier vouches for it (``tier_evidence``)
    sources: frozenset[str] = frozenset()  # what it derives from (``sources_of``)
    parts: dict[str, float] = field(default_factory=dict)

    @property
    def text(self) -> MemoryText:
        """What ranking reads from its content (:func:`text_of`)."""
        return text_of(self.item.content)


class MemoryText:
    """What ranking reads from a memory's text, each part worked out when first asked, once per distinct text
    (:func:`text_of`): a search admits ~100 candidates, and most are read again by the next searches."""

    def __init__(self, content: str) -> None:
        self.content = content

    @functools.cached_property
    def tokens(self) -> list[str]:
        return keyword_tokens(self.content)

    @functools.cached_property
    def asks(self) -> bool:
        """Whether it asks a question (``language.asks``)."""
        return asks(self.content)

    @functools.cached_property
    def own(self) -> frozenset[str]:
        """The keyword index's terms of what it states itself: its text without the neighbours its keyword text
        holds, and without its questions (``language.statements``: a question asserts nothing)."""
        if self.asks:
            return frozenset(index_terms(statements(self.content)))
        return frozenset(stemmed(self.tokens))  # all it says states: a clause's tokens are its text's

    @functools.cached_property
    def addressed(self) -> frozenset[str]:
        """The terms of what a question's turn says to the one it asks (``language.without_self_statements``)."""
        return frozenset(index_terms(without_self_statements(self.content)))

    @functools.cached_property
    def words(self) -> frozenset[str]:
        """Its content words (``selection.information_words``)."""
        return information_words(self.tokens, query_stopwords())

    @functools.cached_property
    def stems(self) -> frozenset[str]:
        return frozenset(light_stem(word) for word in self.words)

    @functools.cached_property
    def identity(self) -> str:
        """Its normalised text: equal identities are one memory (``selection.normalised_text``)."""
        return normalised_text(self.content)

    @functools.cached_property
    def names_time(self) -> bool:
        """Whether it mentions a time (``language.has_time_expression``)."""
        return has_time_expression(self.content)

    @functools.cached_property
    def group(self) -> str:
        """Its similarity calibration group (``calibration.group_of``)."""
        return group_of(self.content)


@functools.lru_cache(maxsize=8192)
def text_of(content: str) -> MemoryText:
    return MemoryText(content)


def sources_of(item: MemoryItem) -> frozenset[str]:
    """The ids a derived memory (a fact, a summary) cites as its sources."""
    sources = item.metadata.get("source_ids")
    return frozenset(s for s in sources if isinstance(s, str)) if isinstance(sources, list) else frozenset()
