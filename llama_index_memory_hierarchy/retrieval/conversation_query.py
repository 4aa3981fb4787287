"""What a ``get()`` searches for: the conversation's topic, not only its last message.

An agent calls ``get()`` with ordinary turns ("ugh, the ring road again"), and the memory that helps is the
one the conversation is about, which the last turn alone rarely names. So the search's query vector is the
input's blended with the recent user turns' (:func:`topic_vector`): the input keeps the larger share, the
newer turns weigh more than the older, so a long dialogue does not drown the current turn. A question keeps
the input alone by default: it names what it asks for (``RankingSettings.question_conversation_weight``).
The recent turns' dates and people count as the input's (:func:`conversation_text`) for a turn that asks
nothing. The weights are ``RankingSettings`` fields, chosen with user-level cross-validation on
``bench/conversation.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from llama_index_memory_hierarchy.language import asks, query_stopwords
from llama_index_memory_hierarchy.ranking.selection import information_words, is_content_free
from llama_index_memory_hierarchy.ranking.settings import RankingSettings
from llama_index_memory_hierarchy.text import keyword_tokens


def conversation_share(query: str, settings: RankingSettings) -> float:
    """The share of the recent turns in the query vector: by whether ``query`` asks a question."""
    return settings.question_conversation_weight if asks(query) else settings.conversation_weight


def recent_turns(turns: Sequence[str], query: str, settings: RankingSettings) -> list[str]:
    """The recent user turns the query reads (oldest first): the last ``conversation_turns`` before ``query``
    that say something ("hi", "ok so" do not), the input itself left out where the history already holds it;
    none when their share is 0."""
    if conversation_share(query, settings) <= 0:
        return []
    turns = list(turns)
    if turns and turns[-1] == query:
        turns = turns[:-1]
    stop = query_stopwords()
    turns = [t for t in turns if not is_content_free(information_words(keyword_tokens(t), stop), matched_query=False)]
    return turns[-settings.conversation_turns :] if settings.conversation_turns else []


def topic_vector(
    vector: np.ndarray, turn_vectors: Sequence[np.ndarray], share: float, *, decay: float = 0.5
) -> np.ndarray:
    """``vector`` (the input's) blended with ``turn_vectors`` (oldest first): they take ``share`` of it together,
    each turn ``decay`` (``RankingSettings.turn_decay``) of the weight of the next; unit length, as the model's
    vectors are. (Embedding the turns and the input as one text instead, as a dense retriever over the dialogue
    does, lost on held-out users in both languages: ``docs/benchmarks.md``.)"""
    usable = [v for v in turn_vectors if v.shape == vector.shape]
    if not usable or share <= 0:
        return vector
    weights = decay ** np.arange(len(usable) - 1, -1, -1, dtype=np.float32)
    recent = (weights / weights.sum()) @ np.stack(usable)
    mixed = (1.0 - share) * vector + share * recent
    norm = float(np.linalg.norm(mixed))
    return (mixed / norm).astype(vector.dtype) if norm > 0 else vector


def conversation_text(query: str, turns: Sequence[str]) -> str:
    """The text whose dates and people the search reads: the recent turns' and the input's, the input last."""
    return "\n".join([*turns, query])


class ShownEarlier:
    """The memories ``get()`` showed for the earlier inputs of one session, so a later turn does not repeat them.

    By input: an agent calls ``get()`` again within one turn (after each tool call), and must see the same
    memories then; a memory shown for an earlier turn is already in the conversation. A question may ask for
    it again (``asks``): then nothing is held back. Bounded to the latest :data:`MAX_INPUTS` inputs.
    """

    MAX_INPUTS = 64

    def __init__(self) -> None:
        self._by_input: dict[str, list[str]] = {}

    def record(self, query: str, ids: Sequence[str]) -> None:
        """``ids`` were shown for ``query`` (the latest input)."""
        self._by_input.pop(query, None)
        self._by_input[query] = list(ids)
        while len(self._by_input) > self.MAX_INPUTS:
            del self._by_input[next(iter(self._by_input))]

    def held_back(self, query: str) -> frozenset[str]:
        """What not to show again for ``query``: what earlier inputs showed, none for a question."""
        if asks(query):
            return frozenset()
        return frozenset(i for text, ids in self._by_input.items() if text != query for i in ids)

    def clear(self) -> None:
        self._by_input.clear()
