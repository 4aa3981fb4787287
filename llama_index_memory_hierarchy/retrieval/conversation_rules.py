"""The conversation rules of the keyword signal: a reply owns the words of the question it answers.

Switched off as one set by ``RankingSettings.context_share = 1`` (a keyword hit then scores by its whole keyword
text, neighbours included).
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable

from llama_index_memory_hierarchy.ranking.pipeline import DEFAULT_RECIPE
from llama_index_memory_hierarchy.retrieval.candidate import Candidate, text_of
from llama_index_memory_hierarchy.text import keyword_text
from llama_index_memory_hierarchy.turns import context_line, format_turn, in_conversation, speaker_of
from llama_index_memory_hierarchy.types import MemoryType


@functools.lru_cache(maxsize=8192)
def as_context(content: str, speaker: str) -> str:
    """A turn's terms as the keyword text of the turns after it holds them, padded by spaces to match whole terms."""
    return f" {keyword_text(context_line(format_turn(content, speaker)))} "


def answered_terms(candidates: Iterable[Candidate]) -> dict[str, frozenset[str]]:
    """The words each candidate turn owns as the answer to a question the other party asked just before it.

    A turn's own keyword credit leaves out the context its keyword text holds (``RankingSettings.context_share``), yet
    the reply to "Congrats on the new studio! How does it feel?" answers that question without ever saying
    "studio": question and answer are one exchange. So a turn owns the words of a question by another
    speaker of its session when both are candidates and its keyword text holds that question (as one of
    the turns before it, ``tiers.episodic.keyword_documents``: turns that share their time have no other order),
    except the words the asker says of itself ("I love badminton, do you like sports?").
    """
    sessions: dict[str, list[Candidate]] = {}
    for cand in candidates:
        item = cand.item
        if item.memory_type is MemoryType.EPISODIC and item.session_id and in_conversation(item) and speaker_of(item):
            sessions.setdefault(item.session_id, []).append(cand)
    answered: dict[str, frozenset[str]] = {}
    window = DEFAULT_RECIPE.context_before
    for turns in sessions.values():
        if not any(c.text.asks for c in turns):
            continue
        turns.sort(key=lambda c: c.item.timestamp)
        times = [c.item.timestamp for c in turns]
        for cand in turns:
            item, indexed = cand.item, f" {cand.indexed} "
            # A question in its keyword text has at most ``window`` - 1 turns between them, so at most that
            # many candidates with a time between theirs; turns that share a time may stand in any order.
            first = bisect.bisect_left(times, item.timestamp)
            low = bisect.bisect_left(times, times[max(first - window, 0)])
            high = bisect.bisect_right(times, item.timestamp)
            for other in turns[low:high]:
                asked = other.item
                asker = speaker_of(asked)
                text = text_of(asked.content)
                if asker != speaker_of(item) and text.asks and as_context(asked.content, asker) in indexed:
                    answered[item.id] = answered.get(item.id, frozenset()) | text.addressed
    return answered
