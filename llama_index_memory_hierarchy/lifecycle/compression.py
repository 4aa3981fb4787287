"""Conversation compression: a running summary of the older turns, within a token budget.

When a session's short-term history no longer fits ``chat_history_token_limit``, the oldest
turns that do not fit are folded into a *running summary* (the previous summary plus those
turns), which ``HierarchicalMemory.get()`` returns in its system message. The summary and
the recent turns together stay within the history budget; the raw turns stay in episodic
memory, where retrieval still finds them (nothing is lost).

Folding leaves headroom (``compression_target``), so a new summary is written every few
turns, not at every turn. The summary is written by the LLM when one is configured
(progressive summarisation), else extractively: the most important sentences of the
previous summary and the folded turns (by the offline importance estimate), in
conversation order. It is persisted per (user, session) in ``lifecycle_summaries``, so a
new process continues the same conversation with the same summary.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole

from llama_index_memory_hierarchy.language import has_han, keyword_tokens, split_sentences
from llama_index_memory_hierarchy.lifecycle.deps import LifecycleDeps
from llama_index_memory_hierarchy.lifecycle.importance import ImportanceEstimator
from llama_index_memory_hierarchy.lifecycle.llm import acomplete
from llama_index_memory_hierarchy.messages import message_text, quote
from llama_index_memory_hierarchy.text import count_tokens

logger = logging.getLogger(__name__)

#: First line of the summary section of the system message.
SUMMARY_HEADER = "Summary of the earlier conversation in this session (older turns, condensed):"
#: The progressive summarisation prompt.
SUMMARY_PROMPT = (
    "Progressively summarize the lines of a conversation between a user and an AI assistant, adding onto the "
    "previous summary and returning a new summary. Keep facts about the user, decisions, commitments and open "
    "questions; drop greetings and small talk. Write at most {words} words, plain text, no preamble.\n\n"
    "Previous summary:\n{previous}\n\n"
    "New lines of conversation:\n{lines}\n\n"
    "New summary:"
)

History = Sequence[tuple[str, ChatMessage, int]]
_MAX_SENTENCE_WORDS = 60


@dataclass
class _SessionSummary:
    summary: str | None = None
    covered_until: str | None = None
    covered_count: int = 0
    method: str = "none"
    loaded: bool = False


def _clip_words(text: str, limit: int) -> str:
    """At most ``limit`` words of ``text``; Chinese, written without spaces, at two characters a word."""
    if has_han(text):
        return text if len(text) <= 2 * limit else text[: 2 * limit] + " …"
    words = text.split()
    return text if len(words) <= limit else " ".join(words[:limit]) + " …"


def fit_tokens(text: str, cap: int) -> str:
    """``text`` cut at a sentence (else word) boundary so that it has at most ``cap`` tokens."""
    if count_tokens(text) <= cap:
        return text
    kept: list[str] = []
    for sentence in split_sentences(text):
        candidate = " ".join([*kept, sentence])
        if count_tokens(candidate) > cap:
            break
        kept.append(sentence)
    if kept:
        return " ".join(kept)
    words = text.split()
    while words and count_tokens(" ".join(words) + " …") > cap:
        words = words[: len(words) - max(1, len(words) // 8)]
    return " ".join(words) + " …" if words else ""


def extractive_lines(
    previous: str | None,
    turns: Sequence[tuple[str, str]],
    cap_tokens: int,
    estimator: ImportanceEstimator | None = None,
) -> list[tuple[int | None, str]]:
    """The lines of :func:`extractive_summary`, each with the position in ``turns`` of the turn it
    quotes (None for a line kept from ``previous``).

    Why: a summary stored as a memory cites the turns it quotes, and only those (a deleted turn
    then changes only the summaries that show it).
    """
    estimator = estimator or ImportanceEstimator()
    candidates: list[tuple[int, int | None, str, float]] = []
    seen: set[str] = set()

    def add(source: int | None, line: str, sentence: str, bonus: float) -> None:
        key = " ".join(sentence.casefold().split())
        if key in seen or len(keyword_tokens(sentence)) < 3:  # words, Chinese ones too
            return
        seen.add(key)
        score = estimator.estimate(sentence)
        if score <= 0.15:  # greetings and acknowledgements
            return
        candidates.append((len(candidates), source, line, score + bonus))

    for line in (previous or "").splitlines():
        line = line.strip()
        if line:
            sentence = line.split(":", 1)[1].strip() if line.startswith("- ") and ":" in line else line
            add(None, line if line.startswith("- ") else f"- {line}", sentence, 0.05)
    for position, (role, text) in enumerate(turns):
        for sentence in split_sentences(text):
            sentence = _clip_words(sentence, _MAX_SENTENCE_WORDS)
            add(position, f"- {role}: {sentence}", sentence, 0.03 if role == "user" else 0.0)
    picked: list[tuple[int, int | None, str]] = []
    used = 0
    for order, source, line, _ in sorted(candidates, key=lambda c: (-c[3], c[0])):
        cost = count_tokens(line) + 1
        if used + cost > cap_tokens:
            continue
        picked.append((order, source, line))
        used += cost
    return [(source, line) for _, source, line in sorted(picked)]


def extractive_summary(
    previous: str | None,
    turns: Sequence[tuple[str, str]],
    cap_tokens: int,
    estimator: ImportanceEstimator | None = None,
) -> str:
    """The most important sentences of ``previous`` and the ``(role, text)`` turns, within ``cap_tokens``.

    Lines read ``- role: sentence`` and keep conversation order. Sentences already in the
    summary get a small bonus (a summary should not churn), user sentences a smaller one.
    """
    return "\n".join(line for _, line in extractive_lines(previous, turns, cap_tokens, estimator))


class ConversationCompressor:
    """Keeps each session's history within its budget by folding old turns into a running summary."""

    def __init__(self, deps: LifecycleDeps, estimator: ImportanceEstimator | None = None) -> None:
        self.deps = deps
        self.estimator = estimator or ImportanceEstimator()
        self._sessions: dict[str, _SessionSummary] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    # ------------------------------------------------------------------ budget
    def cap(self, limit: int) -> int:
        """Most tokens of the summary text for a history budget of ``limit`` tokens."""
        return max(min(self.deps.settings.summary_token_limit, limit // 3) - count_tokens(SUMMARY_HEADER) - 2, 0)

    @staticmethod
    def section(summary: str | None) -> str:
        """The summary as a section of the system message, quoted like every stored text ("" when there is none)."""
        return f"{SUMMARY_HEADER}\n{quote(summary)}" if summary else ""

    def cost(self, summary: str | None) -> int:
        """Tokens the summary section takes from the history budget (with the joints around it)."""
        return count_tokens(self.section(summary)) + 2 if summary else 0

    # ------------------------------------------------------------------ state
    async def _astate(self, session_id: str) -> _SessionSummary:
        state = self._sessions.setdefault(session_id, _SessionSummary())
        if not state.loaded:
            row = await self.deps.store.aget_summary(self.deps.user_id, session_id)
            if row is not None:
                state.summary = row["summary"] or None
                state.covered_until = row["covered_until"]
                state.covered_count = int(row["covered_count"])
                state.method = row["method"]
            state.loaded = True
        return state

    async def asummary(self, session_id: str | None = None) -> str | None:
        """The running summary of a session (default: the current one), or None."""
        state = await self._astate(session_id or self.deps.session_id)
        return state.summary

    async def areset(self, session_id: str | None = None) -> None:
        """Drop a session's running summary (a fresh short-term context starts)."""
        session = session_id or self.deps.session_id
        self._sessions[session] = _SessionSummary(loaded=True)
        await self.deps.store.adelete_summary(self.deps.user_id, session)

    def forget_cached(self, session_id: str | None = None) -> None:
        """Reload summaries (of one session, or all) from the store on next use (after an import, erasure or delete)."""
        if session_id is None:
            self._sessions.clear()
        else:
            self._sessions.pop(session_id, None)

    def has_summary(self, session_id: str) -> bool:
        """Whether this process holds a running summary of ``session_id``."""
        state = self._sessions.get(session_id)
        return state is not None and state.summary is not None

    def covered_turns(self, session_id: str) -> int:
        """How many turns of ``session_id`` this process's running summary covers (0 when it holds none).

        Why: it grows at each fold, so a caller (the lifecycle benchmark) can count the summary's
        rewrites without reading the compressor's state.
        """
        state = self._sessions.get(session_id)
        return state.covered_count if state is not None else 0

    @staticmethod
    def _covered(state: _SessionSummary, history: History) -> int:
        if state.covered_until is not None:
            for position, (memory_id, _, _) in enumerate(history):
                if memory_id == state.covered_until:
                    return position + 1
        return min(state.covered_count, len(history))

    # ------------------------------------------------------------------ compression
    async def acompress(
        self, history: History, limit: int, session_id: str | None = None
    ) -> tuple[History, str | None]:
        """``(turns to show, summary)``: the turns not folded yet, after folding what overflows ``limit``."""
        session = session_id or self.deps.session_id
        lock = self._locks.setdefault(session, asyncio.Lock())
        async with lock:
            state = await self._astate(session)
            covered = self._covered(state, history)
            pending = list(history[covered:])
            tokens = sum(entry[2] for entry in pending)
            if self.cost(state.summary) + tokens <= limit or len(pending) <= 1:
                return pending, state.summary
            cap = self.cap(limit)
            if cap <= 0:
                return pending, state.summary
            target = max(
                int((limit - cap - count_tokens(SUMMARY_HEADER) - 2) * self.deps.settings.compression_target), 1
            )
            fold = 0
            while fold < len(pending) - 1 and tokens > target:
                tokens -= pending[fold][2]
                fold += 1
            while fold < len(pending) - 1 and pending[fold][1].role in (MessageRole.ASSISTANT, MessageRole.TOOL):
                fold += 1  # the window never starts with an answer cut from its question
            folded, pending = pending[:fold], pending[fold:]
            summary, method = await self._asummarise(state.summary, folded, cap)
            state.summary = summary or None
            state.covered_until = folded[-1][0]
            state.covered_count = covered + len(folded)
            state.method = method
            await self.deps.store.aput_summary(
                {
                    "user_id": self.deps.user_id,
                    "session_id": session,
                    "summary": summary,
                    "covered_until": state.covered_until,
                    "covered_count": state.covered_count,
                    "tokens": count_tokens(summary),
                    "method": method,
                    "updated_at": time.time(),
                }
            )
            logger.debug("session %s: folded %d turns into the running summary (%s)", session, len(folded), method)
            return pending, state.summary

    async def _asummarise(self, previous: str | None, folded: History, cap: int) -> tuple[str, str]:
        turns = [(message.role.value, message_text(message)) for _, message, _ in folded]
        llm = self.deps.background_llm()
        if llm is not None:
            try:
                return await self._allm_summary(llm, previous, turns, cap), "llm"
            except Exception as exc:  # a failing model must not break get(): summarise offline
                logger.warning("LLM summary failed (%s: %s); using the extractive summary", type(exc).__name__, exc)
        return extractive_summary(previous, turns, cap, self.estimator), "extractive"

    @staticmethod
    async def _allm_summary(llm: Any, previous: str | None, turns: Sequence[tuple[str, str]], cap: int) -> str:
        lines = "\n".join(f"{role}: {_clip_words(text, 400)}" for role, text in turns)
        prompt = SUMMARY_PROMPT.format(words=max(int(cap * 0.7), 10), previous=previous or "(none)", lines=lines)
        text = " ".join((await acomplete(llm, prompt)).split())
        if not text:
            raise ValueError("empty summary")
        return fit_tokens(text, cap)
