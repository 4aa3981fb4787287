"""Which tier a new memory belongs in: the caller's choice, else an LLM classifier, else heuristics.

The heuristics (:class:`HeuristicRouter`) read cues that psychology uses to tell memory
systems apart: a durable fact or preference ("X is Y", "I prefer...", "I work at...") is
*semantic*; something that happened at a time ("yesterday I met...", "on Monday...") is
*episodic*; a short-lived instruction ("for now", "remind me in 10 minutes") is *working*;
a file, an image or raw bytes is *perceptual*. Each tier gets a score from its cues and the
best one wins (episodic when nothing matches). ``scores`` and ``reason`` say why.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from llama_index_memory_hierarchy.errors import LLMReplyError
from llama_index_memory_hierarchy.language import mentions_event_time
from llama_index_memory_hierarchy.lifecycle.llm import acomplete, object_schema, parse_json
from llama_index_memory_hierarchy.types import MemoryType

logger = logging.getLogger(__name__)

#: The LLM routing prompt (``{content}``: the memory).
ROUTING_PROMPT = (
    "You sort the memories of an AI assistant into the tier where they belong.\n"
    "- working: short-lived, useful only for the current task or the next minutes (an instruction for now, "
    "temporary context).\n"
    "- episodic: an event or experience that happened at a particular time (what the user did, said or saw).\n"
    "- semantic: a durable fact, preference or piece of knowledge (about the user or the world) that stays true.\n"
    "- perceptual: an image, audio, video or other file, or a reference to one.\n"
    'Answer with JSON only: {{"memory_type": "working|episodic|semantic|perceptual", "reason": "<a few words>"}}\n'
    "Memory: {content}\n"
)

_MEDIA_PATH = re.compile(
    r"(?:^|\s|[\"'(])(?:[~.]?/|[A-Za-z]:\\)?[\w\-./\\ ]*\.(?:png|jpe?g|gif|webp|bmp|tiff?|heic|svg|mp3|wav|flac|ogg|"
    r"m4a|aac|opus|mp4|mov|avi|mkv|webm|m4v|pdf)\b|data:(?:image|audio|video)/|\[(?:image|photo|audio|video|file)\]",
    re.IGNORECASE,
)
_WORKING = re.compile(
    r"\b(remind me|for now|right now|at the moment|for the moment|this session|this conversation|for this "
    r"(?:task|chat|conversation)|temporar(?:y|ily)|in the next \w+|in \d+ (?:seconds?|minutes?|mins?|hours?)|"
    r"for the next \w+|let'?s focus on|keep in mind for now|until i say|scratch ?pad|to-?do|next step|"
    r"currently working on|i'?m (?:now )?(?:looking at|working on|debugging|reading))\b",
    re.IGNORECASE,
)
_EVENT_VERB = re.compile(
    r"\b(went|met|visited|saw|watched|attended|travel(?:l)?ed|bought|ate|had (?:a|an|lunch|dinner|breakfast)|"
    r"called|talked|spoke|finished|started|got|won|lost|celebrated|played|drove|flew|arrived|left|happened|"
    r"did|made|took|gave|received|heard|read|wrote|cooked|ran|walked|moved|quit|joined)\b",
    re.IGNORECASE,
)
_FACT = re.compile(
    r"\b(i am (?:a|an|the)|i'm (?:a|an|the)|i work (?:at|for|as)|i live in|i was born|i speak|my \w+(?: \w+)? "
    r"(?:is|are)|i have (?:a|an|two|three|\d+)|i(?:'m| am) allergic|i(?:'m| am) (?:vegetarian|vegan)|"
    r"(?:is|are) (?:the )?(?:capital|part|kind|type|member|author|founder|ceo) of|consists? of|"
    r"i (?:usually|always|never|often|generally)|every (?:day|morning|week)|(?:lives|works|studies) (?:in|at|for|as)|"
    r"(?:is|are) (?:married to|allergic to|called|named|born in|from))\b",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(i (?:really |truly |do(?:n't| not) )?(?:like|love|prefer|enjoy|hate|dislike|adore|detest)|"
    r"i can(?:'t|not) stand|fav(?:ou)?rite|i(?:'d| would) rather|please (?:always|never))\b",
    re.IGNORECASE,
)
_COPULA = re.compile(r"^\s*[\w'’ -]{2,60}?\s(?:is|are|was|were)\s(?:a|an|the|not|\w+)", re.IGNORECASE)


class RoutingDecision(BaseModel):
    """Where a memory goes, who decided, and why."""

    memory_type: MemoryType
    method: str = Field(description="'caller', 'llm', 'heuristic' or 'media'.")
    reason: str = ""
    scores: dict[str, float] = Field(default_factory=dict)


class HeuristicRouter:
    """Offline tier classifier from textual cues (deterministic; see the module docstring)."""

    def scores(self, text: str) -> dict[MemoryType, float]:
        """Score of each tier for ``text`` (higher wins; episodic has a small prior)."""
        scores = {t: 0.0 for t in MemoryType}
        scores[MemoryType.EPISODIC] = 0.25
        if _MEDIA_PATH.search(text):
            scores[MemoryType.PERCEPTUAL] += 0.9
        working = len(_WORKING.findall(text))
        if working:
            scores[MemoryType.WORKING] += 0.6 + 0.15 * (working - 1)
        if mentions_event_time(text):
            scores[MemoryType.EPISODIC] += 0.45
            if _EVENT_VERB.search(text):
                scores[MemoryType.EPISODIC] += 0.15
        elif _EVENT_VERB.search(text):
            scores[MemoryType.EPISODIC] += 0.1
        if _PREFERENCE.search(text):
            scores[MemoryType.SEMANTIC] += 0.6
        if _FACT.search(text):
            scores[MemoryType.SEMANTIC] += 0.5
        elif _COPULA.search(text) and not text.rstrip().endswith("?"):
            scores[MemoryType.SEMANTIC] += 0.35
        return scores

    def classify(self, text: str) -> RoutingDecision:
        """The best-scoring tier; ties go to episodic (the safe, durable default)."""
        scores = self.scores(text)
        order = [MemoryType.EPISODIC, MemoryType.SEMANTIC, MemoryType.WORKING, MemoryType.PERCEPTUAL]
        best = max(order, key=lambda t: scores[t])
        cues = [t.value for t in order if scores[t] > (0.25 if t is MemoryType.EPISODIC else 0.0)]
        reason = f"cues for {', '.join(cues)}" if cues else "no cue: default"
        return RoutingDecision(
            memory_type=best,
            method="heuristic",
            reason=reason,
            scores={t.value: round(s, 3) for t, s in scores.items()},
        )


def is_media(content: Any) -> bool:
    """Bytes, a path object, a file object, an image, or a string that is the path of an existing file."""
    if isinstance(content, (bytes, bytearray, memoryview, os.PathLike)) or hasattr(content, "read"):
        return True
    if isinstance(content, str):  # only an explicit path: a bare word like "notes.md" stays text
        explicit = "/" in content or "\\" in content or content.startswith("~")
        return explicit and "\n" not in content and len(content) < 4096 and "\x00" not in content and _is_file(content)
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow is a core dependency
        return False
    return isinstance(content, Image.Image)


def _is_file(text: str) -> bool:
    try:
        return Path(text).expanduser().is_file()
    except (OSError, ValueError):
        return False


async def allm_route(llm: Any, text: str) -> RoutingDecision:
    """The LLM's choice of tier for ``text``; raises :class:`LLMReplyError` on an unusable answer."""
    schema = object_schema(
        {"memory_type": {"enum": [t.value for t in MemoryType]}, "reason": {"type": "string"}}, ["memory_type"]
    )
    reply = await acomplete(llm, ROUTING_PROMPT.format(content=text[:4000]), schema=schema)
    data = parse_json(reply)
    if not isinstance(data, dict):
        raise LLMReplyError(f"expected a JSON object, got {reply[:200]!r}")
    raw = str(data.get("memory_type") or data.get("tier") or "").strip().lower()
    try:
        memory_type = MemoryType(raw)
    except ValueError:
        raise LLMReplyError(f"unknown memory_type {raw!r} in the LLM reply") from None
    return RoutingDecision(memory_type=memory_type, method="llm", reason=str(data.get("reason") or "")[:200])


async def aroute(content: Any, *, llm: Any = None, router: HeuristicRouter | None = None) -> RoutingDecision:
    """Classify ``content``: media goes to perceptual; text to the LLM's choice, else the heuristics'."""
    if is_media(content):
        return RoutingDecision(memory_type=MemoryType.PERCEPTUAL, method="media", reason="a file or raw media")
    text = str(content)
    if llm is not None:
        try:
            return await allm_route(llm, text)
        except Exception as exc:  # an unusable answer or a failing model: the heuristics still decide
            logger.warning("LLM routing failed (%s: %s); using the heuristics", type(exc).__name__, exc)
    return (router or HeuristicRouter()).classify(text)
