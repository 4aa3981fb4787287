"""MemoryBank loader for ``bench/memorybank.py``: each user's history as a LoCoMo-style :class:`Conversation`.

The files are read by path from ``../shared/benchmarks/memorybank-dev/`` and never copied
(see the dataset's ``SOURCE.md``). One memory per turn: the user's query and the assistant's
response are two :class:`Turn` objects, ``dia_id`` = the evidence id ``"<date>#<index>#<q|r>"``,
event time = the day at noon UTC, one session per day. A probing question becomes a
:class:`QA` whose ``evidence`` is every id it names; its *groups* (``evidence_groups`` when
the label has them, else one group per id) are what :func:`score_groups` counts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from locomo_data import QA, Conversation, Slot, Turn, covered, hit_at, reciprocal_rank

#: File suffix of each language in the dataset folder.
LANGUAGES = {"zh": "cn", "en": "en"}
#: Speaker of the assistant's turns.
ASSISTANT = "AI"


@dataclass
class MemoryBankConversation(Conversation):
    """A user's ten days of chat; ``groups[i]`` are the evidence groups of ``qa[i]``."""

    language: str = "en"
    groups: list[tuple[tuple[str, ...], ...]] = field(default_factory=list)


def evidence_id(day: str, index: int, role: str) -> str:
    """The dataset's evidence id of one turn: ``"2023-04-27#0#q"``."""
    return f"{day}#{index}#{role}"


def parse_user(user: str, raw: dict[str, Any], language: str, days: int | None = None) -> MemoryBankConversation:
    """One user's history as turns (query then response, day by day, in order; the first ``days`` days when given)."""
    turns: list[Turn] = []
    name = str(raw.get("name") or user).strip()
    for number, day in enumerate(sorted(raw.get("history", {}))[:days], start=1):
        when = datetime.combine(date.fromisoformat(day), datetime.min.time(), tzinfo=UTC).replace(hour=12)
        for index, exchange in enumerate(raw["history"][day]):
            parties = (("q", "query", name, "user"), ("r", "response", ASSISTANT, "assistant"))
            for role, key, speaker, chat_role in parties:
                text = str(exchange.get(key) or "").strip()
                if not text:
                    continue
                turns.append(
                    Turn(
                        dia_id=evidence_id(day, index, role),
                        speaker=speaker,
                        text=text,
                        session=number,
                        session_date=when,
                        position=len(turns),
                        session_date_text=day,
                        role=chat_role,
                    )
                )
    return MemoryBankConversation(
        sample_id=user.strip(), speakers=(name, ASSISTANT), turns=turns, qa=[], language=language
    )


def load_memorybank(
    folder: str | Path, language: str, users: int | None = None, days: int | None = None
) -> list[MemoryBankConversation]:
    """The users of ``memorybank-<lang>.json`` that have labels, with their questions.

    ``language`` is ``"zh"`` or ``"en"``; ``users`` keeps the first N users, ``days`` the first
    N days of each history and only the questions whose evidence lies in them (smoke runs).
    Otherwise evidence ids that name no turn are dropped into ``dropped_evidence`` and a
    question left without any group is kept (and skipped when scored).
    """
    if language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}; choose from {', '.join(LANGUAGES)}")
    folder = Path(folder)
    suffix = LANGUAGES[language]
    with open(folder / f"memorybank-{suffix}.json", encoding="utf-8") as handle:
        histories = json.load(handle)
    with open(folder / f"labels-{suffix}.json", encoding="utf-8") as handle:
        labels = json.load(handle)
    conversations: dict[str, MemoryBankConversation] = {}
    for label in labels:
        key = str(label.get("history_key", label["user"]))
        conv = conversations.get(key)
        if conv is None:
            if users is not None and len(conversations) >= users:
                continue
            conv = conversations[key] = parse_user(key, histories[key], language, days)
        known = {t.dia_id for t in conv.turns}
        raw_groups = label.get("evidence_groups") or [[e] for e in label.get("evidence", [])]
        groups: list[tuple[str, ...]] = []
        for group in raw_groups:
            kept = tuple(str(e) for e in group if str(e) in known)
            if days is None:
                conv.dropped_evidence.extend(str(e) for e in group if str(e) not in known)
            if kept:
                groups.append(kept)
        if days is not None and len(groups) < len(raw_groups):
            continue
        evidence = tuple(dict.fromkeys(e for g in groups for e in g))
        conv.qa.append(QA(str(label["question"]), str(label.get("answer", "")), 0, evidence))
        conv.groups.append(tuple(groups))
    return list(conversations.values())


def group_recall_at(ranked: Sequence[Slot], groups: Sequence[Sequence[str]], k: int, by_sources: bool = False) -> float:
    """Share of evidence groups with at least one id in the first ``k`` memories shown (``locomo_data.slot_ids``)."""
    top = covered(ranked, k, by_sources)
    return sum(1 for g in groups if any(e in top for e in g)) / len(groups)


def score_groups(
    results: Sequence[tuple[tuple[tuple[str, ...], ...], Sequence[Slot]]], ks: Sequence[int], by_sources: bool = False
) -> dict[str, dict[str, float]]:
    """recall@k (by group), hit@k and MRR averaged over the questions, as ``{"overall": {...}}``."""
    rows = []
    skipped = 0
    for groups, ranked in results:
        if not groups:
            skipped += 1
            continue
        flat = [e for g in groups for e in g]
        row = {"mrr": reciprocal_rank(ranked, flat, by_sources)}
        for k in ks:
            row[f"recall@{k}"] = group_recall_at(ranked, groups, k, by_sources)
            row[f"hit@{k}"] = hit_at(ranked, flat, k, by_sources)
        rows.append(row)
    summary: dict[str, dict[str, float]] = {"_meta": {"n_skipped": float(skipped)}}
    if rows:
        summary["overall"] = {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]}
        summary["overall"]["n"] = float(len(rows))
    return summary
