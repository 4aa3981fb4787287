"""Importance of a memory: given by the caller, rated by an LLM, or estimated offline; reinforced by use.

* **LLM rating** (Generative Agents, Park et al. 2023): the model rates the poignancy of the
  memory from 1 (mundane: brushing teeth) to 10 (poignant: a break-up, a college acceptance);
  the rating is normalised to [0, 1] as ``(r - 1) / 9``.
* **Offline estimate** (:class:`ImportanceEstimator`): a transparent sum of text features:
  first-person facts, preferences, cue words (allergy, deadline, birthday...), named
  entities, numbers and dates, emotional words, and length, with greetings and bare
  acknowledgements pushed down. ``features()`` shows what each contributed.
* **Reinforcement by access** (:func:`effective_importance`): each time a memory is recalled
  its ``access_count`` grows; the effective importance rises towards 1 with diminishing
  returns, so what is used keeps being remembered (forgetting and ranking use it).
"""

from __future__ import annotations

import logging
import math
import re
from typing import Any

from llama_index_memory_hierarchy.errors import LLMReplyError
from llama_index_memory_hierarchy.lifecycle.llm import acomplete, object_schema, parse_rating
from llama_index_memory_hierarchy.ranking.fusion import reinforcement
from llama_index_memory_hierarchy.types import MemoryItem

logger = logging.getLogger(__name__)

#: The Generative Agents importance prompt (``{memory}`` is the text to rate).
IMPORTANCE_PROMPT = (
    "On the scale of 1 to 10, where 1 is purely mundane (e.g., brushing teeth, making bed) and 10 is "
    "extremely poignant (e.g., a break up, college acceptance), rate the likely poignancy of the following "
    "piece of memory. Answer with one integer.\n"
    "Memory: {memory}\n"
    "Rating:"
)

RATING_SCHEMA = object_schema({"rating": {"type": "integer", "minimum": 1, "maximum": 10}}, ["rating"])
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_FIRST_PERSON_FACT = re.compile(
    r"\b(i am|i'm|i was|i have|i've|i had|i work|i worked|i live|i lived|i moved|i was born|i study|i studied|"
    r"my (?:name|job|wife|husband|partner|son|daughter|sister|brother|mother|mom|father|dad|friend|boss|"
    r"birthday|address|email|phone|home|dog|cat|kids?|children|team|company)\b|we (?:are|have|live|moved))",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(i (?:really |truly |do(?:n't| not) )?(?:like|love|prefer|enjoy|hate|dislike|adore|detest)|"
    r"i can(?:'t|not) stand|my fav(?:ou)?rite|i(?:'m| am) (?:a )?(?:fan of|allergic|vegetarian|vegan|"
    r"lactose|afraid of|into)|please (?:always|never)|i(?:'d| would) rather)",
    re.IGNORECASE,
)
_CUES = re.compile(
    r"\b(important|remember|don't forget|do not forget|never|always|must|allerg\w*|password|deadline|"
    r"birthday|anniversary|emergency|urgent|diagnos\w*|doctor|hospital|surgery|wedding|married|engaged|"
    r"divorc\w*|pregnan\w*|died|passed away|funeral|promot\w*|fired|hired|new job|graduat\w*|accepted|"
    r"moved to|moving to|broke up|baby|born)\b",
    re.IGNORECASE,
)
_EMOTION = re.compile(
    r"\b(love|loved|hate|hated|afraid|scared|terrified|excited|thrilled|happy|sad|angry|furious|upset|"
    r"worried|anxious|nervous|devastated|heartbroken|proud|grateful|lonely|depressed|stressed|overjoyed|"
    r"disappointed|frustrated)\b",
    re.IGNORECASE,
)
_DATE = re.compile(
    r"\b(\d{1,4}(?:[/.-]\d{1,2}){1,2}|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? \d{1,2}|"
    r"\d{1,2}(?:st|nd|rd|th)|monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|"
    r"next (?:week|month|year)|\d{1,2}(?::\d{2})? ?(?:am|pm))\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\d")
_FILLER = frozenset(
    [
        "ok",
        "okay",
        "k",
        "sure",
        "thanks",
        "thank",
        "you",
        "thx",
        "ty",
        "hi",
        "hello",
        "hey",
        "bye",
        "goodbye",
        "yes",
        "no",
        "yeah",
        "yep",
        "nope",
        "cool",
        "great",
        "nice",
        "lol",
        "haha",
        "hmm",
        "alright",
        "fine",
        "good",
        "morning",
        "evening",
        "night",
        "welcome",
        "np",
        "please",
    ]
)


class ImportanceEstimator:
    """Offline importance in [0, 1] from text features (no model, deterministic, explainable)."""

    base = 0.3

    def features(self, text: str) -> dict[str, float]:
        """Each feature's contribution to the estimate (sums with ``base`` to the raw score)."""
        words = _WORD.findall(text)
        lowered = [w.casefold() for w in words]
        contributions: dict[str, float] = {}
        if not words or all(w in _FILLER for w in lowered):
            return {"filler": -0.2}
        if _FIRST_PERSON_FACT.search(text):
            contributions["first_person_fact"] = 0.15
        if _PREFERENCE.search(text):
            contributions["preference"] = 0.2
        cues = len(_CUES.findall(text))
        if cues:
            contributions["cue_words"] = min(0.1 + 0.05 * cues, 0.25)
        emotions = len(_EMOTION.findall(text))
        if emotions:
            contributions["emotion"] = min(0.08 * emotions, 0.15)
        names = _named_entities(text)
        if names:
            contributions["named_entities"] = min(0.05 * names, 0.1)
        if _DATE.search(text):
            contributions["date_or_time"] = 0.1
        elif _NUMBER.search(text):
            contributions["numbers"] = 0.05
        if len(words) < 4:
            contributions["very_short"] = -0.1
        else:
            contributions["length"] = min(0.03 * math.log2(len(words) / 4 + 1), 0.1)
        if text.rstrip().endswith("?") and "preference" not in contributions:
            contributions["question"] = -0.1
        return contributions

    def estimate(self, text: str) -> float:
        """The estimate, clipped to [0.05, 0.95] (never certain either way)."""
        score = self.base + sum(self.features(text).values())
        return round(min(max(score, 0.05), 0.95), 4)


def _named_entities(text: str) -> int:
    """Capitalised words that do not start a sentence (a cheap proper-noun count)."""
    count = 0
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
        tokens = sentence.split()
        for token in tokens[1:]:
            word = token.strip("\"'“”‘’()[],;:.!?")
            if len(word) > 1 and word[0].isupper() and word not in {"I", "I'm", "I've", "I'd", "I'll"}:
                count += 1
    return count


async def arate_importance(llm: Any, text: str) -> float:
    """The LLM's 1-10 poignancy rating of ``text``, normalised to [0, 1]; raises :class:`LLMReplyError`."""
    reply = await acomplete(llm, IMPORTANCE_PROMPT.format(memory=text[:4000]), schema=RATING_SCHEMA)
    rating = parse_rating(reply)
    return round((rating - 1) / 9, 4)


async def aestimate_importance(
    text: str, *, llm: Any = None, estimator: ImportanceEstimator | None = None
) -> tuple[float, str]:
    """``(importance, method)``: the LLM rating when ``llm`` is given and answers, else the offline estimate."""
    estimator = estimator or ImportanceEstimator()
    if llm is not None:
        try:
            return await arate_importance(llm, text), "llm"
        except LLMReplyError as exc:
            logger.warning("importance rating by the LLM failed (%s); using the offline estimate", exc)
        except Exception as exc:  # a hosted model may time out or refuse: the estimate still works
            logger.warning(
                "importance rating by the LLM failed (%s: %s); using the offline estimate", type(exc).__name__, exc
            )
    return estimator.estimate(text), "offline"


def effective_importance(item: MemoryItem, *, strength: float = 0.25, saturation: float = 5.0) -> float:
    """Importance reinforced by access: ``i + (1 - i) * reinforcement(access_count)``, in [0, 1]."""
    boost = reinforcement(item.access_count, strength=strength, saturation=saturation)
    return min(1.0, item.importance + (1.0 - item.importance) * boost)
