"""The query's analysis: what ranking reads from the query text alone, worked out while the model embeds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from llama_index_memory_hierarchy.calibration import group_of
from llama_index_memory_hierarchy.language import (
    TimeHint,
    asks,
    asks_to_recall,
    named_chat_party,
    query_stopwords,
)
from llama_index_memory_hierarchy.ranking.pipeline import extract_time_hints, has_temporal_intent, keyword_terms
from llama_index_memory_hierarchy.ranking.selection import information_words, is_content_free
from llama_index_memory_hierarchy.text import index_terms, keyword_tokens
from llama_index_memory_hierarchy.types import utcnow


@dataclass(frozen=True)
class Query:
    """What ranking reads from the query text alone: worked out while the model embeds it."""

    text: str
    context: str  # the text whose people and dates count: the input's, with the recent turns' for small talk
    now: datetime
    party: str | None  # the chat party it names by pronoun (``named_chat_party``)
    hints: list[TimeHint]
    temporal: bool  # it asks *when*
    chat: bool  # a turn of a conversation that asks nothing (small talk: ``RankingSettings.chat_keyword_weight``)
    words: frozenset[str]  # its content words (none for a content-free query: "好的", "ok")
    recall: bool  # it asks for what the user told in general ("what did I tell you earlier?": ``asks_to_recall``)
    group: str  # its calibration group
    keywords: str  # what the keyword search looks for (``keyword_terms``)
    terms: frozenset[str]  # its keyword index terms
    vector: list[np.ndarray] = field(default_factory=list, compare=False)  # its embedding, once it is there

    @classmethod
    def of(cls, text: str, context: str | None = None, *, in_conversation: bool = False) -> Query:
        now = utcnow()
        context = context or text
        words = information_words(keyword_tokens(text), query_stopwords())
        keywords = " ".join(keyword_terms(text))
        return cls(
            text=text,
            context=context,
            now=now,
            party=named_chat_party(text),
            hints=extract_time_hints(context, now),
            temporal=has_temporal_intent(text),
            chat=in_conversation and not asks(text),
            words=frozenset() if is_content_free(words, matched_query=False) else words,
            recall=asks_to_recall(text),
            group=group_of(text),
            keywords=keywords,
            terms=frozenset(index_terms(keywords)),
        )
