"""Context assembly: ranked memory lines into a token budget, best first, none repeated or cut."""

from __future__ import annotations

from collections.abc import Callable, Iterable


def fill_budget(lines: Iterable[str], budget: int, limit: int, count: Callable[[str], int]) -> list[str]:
    """The first ``limit`` distinct lines that fit in ``budget`` tokens, in the given (best-first) order.

    A line that does not fit is dropped whole (never cut mid-line) and the next, shorter ones still
    get their chance; each line costs its tokens plus one for the newline joining it.
    """
    kept: list[str] = []
    seen: set[str] = set()
    for line in lines:
        if len(kept) >= limit or budget <= 0:
            break
        if line in seen:
            continue
        cost = count(line) + 1
        if cost > budget:
            continue
        seen.add(line)
        kept.append(line)
        budget -= cost
    return kept
