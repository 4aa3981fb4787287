"""LoCoMo loader and retrieval metrics for ``bench/locomo.py``.

The LoCoMo file is read by path and never copied (CC BY-NC 4.0; see the dataset's
``SOURCE.md``). Everything here is plain data: the retrievers in
``bench/locomo_retrievers.py`` see only :class:`Turn` objects and question strings,
never a question's category, evidence or answer.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: Category ids of the LoCoMo QA items.
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
#: Categories averaged into "overall" (5, adversarial, is reported apart as the field does).
OVERALL_CATEGORIES = (1, 2, 3, 4)

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_EVIDENCE_ID = re.compile(r"D:?\s*(\d+)\s*:\s*(\d+)")
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y")


@dataclass(frozen=True)
class Turn:
    """One dialogue turn, ready to index (``text`` includes an image caption when one was shared)."""

    dia_id: str
    speaker: str
    text: str
    session: int
    session_date: datetime
    position: int  # index of the turn in the conversation (chronological)
    session_date_text: str = ""  # the date as LoCoMo writes it, e.g. "1:56 pm on 8 May, 2023"
    role: str | None = None  # "user" or "assistant" in a chat with an assistant; None between two people


@dataclass(frozen=True)
class QA:
    """One question with its normalised evidence (dia ids that name real turns)."""

    question: str
    answer: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    """A LoCoMo conversation: two speakers, sessions of turns, and QA items."""

    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    qa: list[QA]
    dropped_evidence: list[str] = field(default_factory=list)


def parse_session_date(value: str) -> datetime:
    """Parse LoCoMo's ``"1:56 pm on 8 May, 2023"`` into an aware UTC datetime."""
    cleaned = re.sub(r"\s+", " ", value.strip())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo session date: {value!r}")


def normalise_evidence(raw: Iterable[Any], known: set[str]) -> tuple[list[str], list[str]]:
    """Split and repair evidence strings; return (ids that name a turn, dropped strings).

    Handles ``"D8:6; D9:17"`` (two ids in one string), ``"D:11:26"`` (stray colon) and
    ``"D30:05"`` (leading zero). Duplicates are removed, order kept.
    """
    kept: list[str] = []
    dropped: list[str] = []
    for item in raw:
        text = str(item)
        matches = _EVIDENCE_ID.findall(text)
        if not matches:
            dropped.append(text)
            continue
        for session, turn in matches:
            dia_id = f"D{int(session)}:{int(turn)}"
            if dia_id in known:
                if dia_id not in kept:
                    kept.append(dia_id)
            else:
                dropped.append(text)
    return kept, dropped


def turn_text(turn: dict[str, Any]) -> str:
    """The text to index for a raw turn: its words plus the BLIP caption of a shared image."""
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [shares an image: {str(caption).strip()}]"
    return text


def parse_conversation(sample: dict[str, Any]) -> Conversation:
    """Turn one item of the LoCoMo list into a :class:`Conversation`."""
    conv = sample["conversation"]
    sessions = sorted(int(m.group(1)) for key in conv if (m := _SESSION_KEY.match(key)))
    turns: list[Turn] = []
    for number in sessions:
        raw_turns = conv.get(f"session_{number}") or []
        if not raw_turns:
            continue
        date_text = str(conv[f"session_{number}_date_time"]).strip()
        date = parse_session_date(date_text)
        for raw in raw_turns:
            turns.append(
                Turn(
                    dia_id=str(raw["dia_id"]).strip(),
                    speaker=str(raw["speaker"]),
                    text=turn_text(raw),
                    session=number,
                    session_date=date,
                    position=len(turns),
                    session_date_text=date_text,
                )
            )
    known = {t.dia_id for t in turns}
    qa: list[QA] = []
    dropped_all: list[str] = []
    for item in sample.get("qa", []):
        evidence, dropped = normalise_evidence(item.get("evidence", []), known)
        dropped_all.extend(dropped)
        answer = item.get("answer", item.get("adversarial_answer", ""))
        qa.append(QA(str(item["question"]), str(answer), int(item["category"]), tuple(evidence)))
    return Conversation(
        sample_id=str(sample.get("sample_id", "")),
        speakers=(str(conv["speaker_a"]), str(conv["speaker_b"])),
        turns=turns,
        qa=qa,
        dropped_evidence=dropped_all,
    )


def load_locomo(path: str | Path, conversations: int | None = None) -> list[Conversation]:
    """Load the LoCoMo JSON at ``path`` (the first ``conversations`` items when given)."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if conversations is not None:
        data = data[:conversations]
    return [parse_conversation(sample) for sample in data]


# ---------------------------------------------------------------------------------- metrics
@dataclass(frozen=True)
class Derived:
    """A derived memory (fact, summary) the agent is shown: the source turns whose content it reproduces, and all."""

    shown: tuple[str, ...]  # the turns it reproduces at least half the content words of (``reproduces``)
    sources: tuple[str, ...]  # every turn of its ``source_ids``


#: One ranked result (one memory shown): a turn id, or a derived memory.
Slot = str | Derived


#: Share of a turn's content words a derived memory must hold to count for that turn.
REPRODUCED_SHARE = 0.5


def content_words(text: str) -> frozenset[str]:
    """The content words of ``text`` (the library's tokens less its stop-words), lightly stemmed."""
    from llama_index_memory_hierarchy.language import keyword_tokens, query_stopwords
    from llama_index_memory_hierarchy.ranking.pipeline import light_stem

    stop = query_stopwords()
    return frozenset(light_stem(t) for t in keyword_tokens(text) if t not in stop)


def reproduces(derived: str, turn: str) -> bool:
    """Whether the text of a derived memory holds at least :data:`REPRODUCED_SHARE` of a turn's content words."""
    words = content_words(turn)
    return bool(words) and len(words & content_words(derived)) >= REPRODUCED_SHARE * len(words)


def slot_ids(slot: Slot, by_sources: bool = False) -> tuple[str, ...]:
    """The turn ids one shown memory counts for: a derived memory for the turns it reproduces, or with
    ``by_sources`` for every id of its ``source_ids`` (the older, lenient count)."""
    if isinstance(slot, str):
        return (slot,)
    return slot.sources if by_sources else slot.shown


def covered(ranked: Sequence[Slot], k: int, by_sources: bool = False) -> set[str]:
    """Turn ids of the first ``k`` memories shown (see :func:`slot_ids`)."""
    return {dia_id for slot in ranked[:k] for dia_id in slot_ids(slot, by_sources)}


def recall_at(ranked: Sequence[Slot], evidence: Sequence[str], k: int, by_sources: bool = False) -> float:
    """Share of evidence ids found in the first ``k`` memories shown."""
    top = covered(ranked, k, by_sources)
    return sum(1 for e in evidence if e in top) / len(evidence)


def hit_at(ranked: Sequence[Slot], evidence: Sequence[str], k: int, by_sources: bool = False) -> float:
    """1.0 when any evidence id is in the first ``k``."""
    top = covered(ranked, k, by_sources)
    return 1.0 if any(e in top for e in evidence) else 0.0


def reciprocal_rank(ranked: Sequence[Slot], evidence: Sequence[str], by_sources: bool = False) -> float:
    """1 / rank of the first memory shown that holds an evidence id (0 when none was retrieved)."""
    wanted = set(evidence)
    for rank, slot in enumerate(ranked, start=1):
        if wanted.intersection(slot_ids(slot, by_sources)):
            return 1.0 / rank
    return 0.0


def score_rankings(
    results: Sequence[tuple[QA, Sequence[Slot]]], ks: Sequence[int], by_sources: bool = False
) -> dict[str, dict[str, float]]:
    """Aggregate recall@k, hit@k and MRR per category, plus "overall" (categories 1-4).

    Questions without any valid evidence are skipped (counted in ``n_skipped``); ``by_sources``: see :func:`slot_ids`.
    """
    buckets: dict[str, list[dict[str, float]]] = defaultdict(list)
    skipped = 0
    for qa, ranked in results:
        if not qa.evidence:
            skipped += 1
            continue
        row = {"mrr": reciprocal_rank(ranked, qa.evidence, by_sources)}
        for k in ks:
            row[f"recall@{k}"] = recall_at(ranked, qa.evidence, k, by_sources)
            row[f"hit@{k}"] = hit_at(ranked, qa.evidence, k, by_sources)
        buckets[str(qa.category)].append(row)
        if qa.category in OVERALL_CATEGORIES:
            buckets["overall"].append(row)
    summary: dict[str, dict[str, float]] = {}
    for name, rows in buckets.items():
        summary[name] = {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]}
        summary[name]["n"] = float(len(rows))
    summary["_meta"] = {"n_skipped": float(skipped)}
    return summary
