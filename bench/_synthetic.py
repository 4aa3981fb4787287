"""Deterministic synthetic conversation turns for the latency benchmarks (no data files)."""

from __future__ import annotations

import random

_PEOPLE = ["Alice", "Bob", "Chen", "Dana", "Emeka", "Fatima", "Gustav", "Hana", "Ivan", "Julia", "Kofi", "Lena"]
_ACTIVITIES = [
    "went hiking in the mountains",
    "started learning the violin",
    "adopted a rescue dog",
    "fixed the kitchen sink",
    "read a novel about space travel",
    "baked sourdough bread",
    "signed up for a marathon",
    "visited the dentist",
    "planned a trip to Kyoto",
    "switched to a standing desk",
    "planted tomatoes on the balcony",
    "finished a Python course",
    "repainted the living room",
    "lost their keys at the station",
    "booked a cooking class",
    "bought a second-hand bicycle",
    "watched a documentary about whales",
    "moved to a new apartment",
    "started a book club",
    "learned to play chess openings",
]
_PLACES = ["in Lisbon", "near the river", "at the office", "in the old town", "at home", "downtown", "by the lake", ""]
_TIMES = ["last weekend", "yesterday", "on Monday", "this morning", "two weeks ago", "in spring", "after work", ""]
_FEELINGS = ["and loved it", "but found it hard", "and wants to do it again", "with a friend", "for the first time", ""]


def turns(count: int, seed: int = 7) -> list[str]:
    """``count`` varied, natural-looking statements."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        parts = [
            rng.choice(_PEOPLE),
            rng.choice(_ACTIVITIES),
            rng.choice(_PLACES),
            rng.choice(_TIMES),
            rng.choice(_FEELINGS),
        ]
        out.append(" ".join(p for p in parts if p) + f" (note {i}).")
    return out


def questions(count: int, seed: int = 11) -> list[str]:
    """``count`` distinct questions about such statements."""
    rng = random.Random(seed)
    templates = ["When did {p} {a}?", "Who {a}?", "Did {p} enjoy it when they {a}?", "Where did {p} {a}?"]
    out = []
    for i in range(count):
        activity = rng.choice(_ACTIVITIES)
        out.append(rng.choice(templates).format(p=rng.choice(_PEOPLE), a=activity) + f" #{i}")
    return out
