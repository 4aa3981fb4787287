"""Time in text: the dates and periods a text names (:func:`extract_time_hints`), and whether it asks for or
mentions a time. The words and patterns are the language tables' (:mod:`.en`, :mod:`.zh`); this is how they are read."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, Literal

from llama_index_memory_hierarchy.language import en, zh
from llama_index_memory_hierarchy.language.scripts import has_han
from llama_index_memory_hierarchy.types import as_utc

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TimeHint:
    """A time a text refers to: the interval ``[start, end)`` and how precise it is.

    ``yearless``: the text named no year ("5月2日", "on May 2nd", "in April"); ``start`` is then
    the latest such day or month not after the reference time, and :meth:`in_year` the same day
    or month of another year: a memory of that day in any year answers it.
    """

    start: datetime
    end: datetime
    granularity: Literal["day", "week", "month", "season", "year"]
    text: str = field(default="", compare=False)
    yearless: bool = False

    def in_year(self, year: int) -> TimeHint | None:
        """The same day or month in ``year`` (None for 29 February in a common year)."""
        try:
            start = self.start.replace(year=year)
        except ValueError:
            return None
        return replace(self, start=start, end=start + (self.end - self.start))


def _utc(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=timezone.utc)


def _month_span(year: int, month: int, count: int = 1) -> tuple[datetime, datetime]:
    start = _utc(year, month, 1)
    end_month = month + count
    end = _utc(year + (end_month - 1) // 12, (end_month - 1) % 12 + 1, 1)
    return start, end


def _latest_year(now: datetime, month: int, day: int = 1) -> int:
    """The year of the latest ``month``/``day`` not after ``now`` (whether that day exists or not)."""
    return now.year if (month, day) <= (now.month, now.day) else now.year - 1


def _latest_day(now: datetime, month: int, day: int) -> datetime | None:
    """The latest ``month``/``day`` not after ``now`` (29 February: of the last leap year); None if no such day."""
    year = _latest_year(now, month, day)
    for back in range(8):
        if (found := _safe_day(year - back, month, day)) is not None:
            return found
    return None


def _safe_day(year: int, month: int, day: int) -> datetime | None:
    try:
        return _utc(year, month, day)
    except ValueError:
        return None


def _english_time_hints(query: str, now: datetime | None) -> list[TimeHint]:
    hints: list[TimeHint] = []
    taken: list[tuple[int, int]] = []

    def free(match: re.Match[str]) -> bool:
        a, b = match.span()
        return all(b <= s or a >= e for s, e in taken)

    def add(match: re.Match[str], start: datetime | None, end: datetime | None, granularity: Any) -> None:
        taken.append(match.span())  # an impossible date (30 February) is still not a year
        if start is None or end is None:
            return
        hints.append(TimeHint(start, end, granularity, match.group(0)))

    for m in en.ISO_DATE.finditer(query):
        day = _safe_day(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        add(m, day, day + timedelta(days=1) if day else None, "day")
    for m in en.DAY_MONTH_YEAR.finditer(query):
        if free(m):
            day = _safe_day(int(m.group(3)), en.MONTHS[m.group(2).lower()], int(m.group(1)))
            add(m, day, day + timedelta(days=1) if day else None, "day")
    for m in en.MONTH_DAY_YEAR.finditer(query):
        if free(m):
            day = _safe_day(int(m.group(3)), en.MONTHS[m.group(1).lower()], int(m.group(2)))
            add(m, day, day + timedelta(days=1) if day else None, "day")
    for m in en.MONTH_YEAR.finditer(query):
        if free(m):
            add(m, *_month_span(int(m.group(2)), en.MONTHS[m.group(1).lower()]), "month")
    for m in en.SEASON_YEAR.finditer(query):
        if free(m):
            first, count = en.SEASONS[m.group(1).lower()]
            add(m, *_month_span(int(m.group(2)), first, count), "season")
    for m in en.YEAR_ONLY.finditer(query):
        if free(m):
            year = int(m.group(1))
            add(m, _utc(year, 1, 1), _utc(year + 1, 1, 1), "year")
    if now is None:
        return hints
    for pattern, month_group, day_group in ((en.MONTH_DAY, 1, 2), (en.DAY_MONTH, 2, 1)):
        for m in pattern.finditer(query):
            if free(m) and not (m.group(month_group).lower() == "may" and m.group(month_group).islower()):
                day = _latest_day(now, en.MONTHS[m.group(month_group).lower()], int(m.group(day_group)))
                taken.append(m.span())
                if day is not None:
                    hints.append(TimeHint(day, day + timedelta(days=1), "day", m.group(0), yearless=True))
    for m in en.MONTH_ALONE.finditer(query):
        if free(m) and not (m.group(1).lower() == "may" and not m.group(0)[0].isalpha()):
            month = en.MONTHS[m.group(1).lower()]
            taken.append(m.span())
            start, end = _month_span(_latest_year(now, month), month)
            hints.append(TimeHint(start, end, "month", m.group(0), yearless=True))
    today = _utc(now.year, now.month, now.day)
    for m in en.RELATIVE_DAY.finditer(query):
        if free(m):
            word = m.group(1).lower()
            offset = -1 if word == "yesterday" else 1 if word == "tomorrow" else 0
            day = today + timedelta(days=offset)
            add(m, day, day + timedelta(days=1), "day")
    for m in en.RELATIVE_UNIT.finditer(query):
        if not free(m):
            continue
        which, unit = m.group(1).lower(), m.group(2).lower()
        step = {"last": -1, "past": -1, "this": 0, "next": 1}[which]
        if unit in ("week", "weekend"):
            monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
            if unit == "weekend":
                add(m, monday + timedelta(days=5), monday + timedelta(days=7), "day")
            else:
                add(m, monday, monday + timedelta(days=7), "week")
        elif unit == "month":
            index = now.year * 12 + now.month - 1 + step
            add(m, *_month_span(index // 12, index % 12 + 1), "month")
        else:
            year = now.year + step
            add(m, _utc(year, 1, 1), _utc(year + 1, 1, 1), "year")
    for m in en.AGO.finditer(query):
        if not free(m):
            continue
        amount = en.NUMBER_WORDS.get(m.group(1).lower().removeprefix("a ").strip())
        if amount is None:
            amount = int(m.group(1)) if m.group(1).isdigit() else 1
        unit = m.group(2).lower()
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * amount
        centre = today - timedelta(days=days)
        spread = timedelta(days=max(1, days // 7))
        add(m, centre - spread, centre + spread, unit)
    return hints


def _zh_number(text: str) -> str:
    """A Chinese numeral up to 99 as digits: ``"三"`` -> ``"3"``, ``"十二"`` -> ``"12"``, ``"二十"`` -> ``"20"``."""
    if "十" not in text:
        return "".join(str(zh.DIGITS[ch]) for ch in text)
    tens, _, ones = text.partition("十")
    return str((zh.DIGITS.get(tens, 1) if tens else 1) * 10 + (zh.DIGITS.get(ones, 0) if ones else 0))


def _span_hint(moment: datetime, period: str, text: str) -> TimeHint:
    """The interval of a parsed moment at dateparser's precision (``period``)."""
    day = _utc(moment.year, moment.month, moment.day)
    if period == "week":
        monday = day - timedelta(days=day.weekday())
        return TimeHint(monday, monday + timedelta(days=7), "week", text)
    if period == "month":
        return TimeHint(*_month_span(moment.year, moment.month), "month", text)
    if period == "year":
        return TimeHint(_utc(moment.year, 1, 1), _utc(moment.year + 1, 1, 1), "year", text)
    return TimeHint(day, day + timedelta(days=1), "day", text)


@lru_cache(maxsize=1)
def _zh_date_parser() -> Any:
    from dateparser.date import DateDataParser

    return DateDataParser(languages=["zh"], settings={"PREFER_DATES_FROM": "past"})


def _chinese_time_hints(query: str, now: datetime | None) -> list[TimeHint]:
    hints: list[TimeHint] = []
    text = zh.NUMBER.sub(lambda m: _zh_number(m.group(0)), zh.ASKED_TIME.sub(" ", query))
    for m in zh.MONTH_DAY.finditer(text):
        year = int(m.group(1)) if m.group(1) else None
        month, day_number = int(m.group(2)), int(m.group(3))
        yearless = year is None
        if year is None and now is None:
            continue
        day = _latest_day(now, month, day_number) if year is None else _safe_day(year, month, day_number)
        if day is not None:
            hints.append(TimeHint(day, day + timedelta(days=1), "day", m.group(0), yearless=yearless))
    text = zh.MONTH_DAY.sub(" ", text)
    if now is None or not zh.TIME_CUE.search(text):
        return hints
    from dateparser.search import search_dates

    base = as_utc(now).replace(tzinfo=None)
    settings = {"RELATIVE_BASE": base, "PREFER_DATES_FROM": "past", "REQUIRE_PARTS": []}
    try:
        found = search_dates(text, languages=["zh"], settings=settings) or []
    except Exception:  # dateparser's search raises on some odd inputs: no hint then
        logger.debug("dateparser failed on %r", text, exc_info=True)
        found = []
    for span, moment in found:
        span = span.strip()
        if span.isdigit():  # a bare number is not a date
            continue
        # search_dates gives the moment (relative to ``base``); the parser tells its precision.
        period = getattr(_zh_date_parser().get_date_data(span), "period", None) or "day"
        hints.append(_span_hint(moment, period, span))
    return hints


def extract_time_hints(text: str, now: datetime | None = None) -> list[TimeHint]:
    """Dates and periods named in ``text``, as UTC intervals, relative to ``now`` (the event or query time).

    English: absolute dates (``"6 March, 2021"``, ``"October 3, 2021"``, ``"2021-03-06"``),
    months (``"May 2023"``; ``"in May"`` = the latest May not after ``now``), seasons,
    years, and relative to ``now`` ``today``/``yesterday``, ``last week``/``this month`` and
    ``N days ago``. Chinese (via ``dateparser``): ``"5月2日"``, ``"2023年5月2日"``, ``"上周"``,
    ``"上个月"``, ``"去年"``, ``"三天前"``, ``"昨天晚上"``... Relative expressions are ignored
    when ``now`` is None. Overlapping English matches are reported once (the most precise wins).
    """
    if not text:
        return []
    now = as_utc(now) if now is not None else None
    hints = _english_time_hints(text, now)
    if has_han(text):
        hints += _chinese_time_hints(text, now)
    hints.sort(key=lambda h: h.start)
    return hints


_TEMPORAL_INTENT = re.compile(f"{en.TEMPORAL_INTENT}|{zh.TEMPORAL_INTENT}", re.I)
#: Any mention of a time (``yesterday``, ``last``, ``in May``, ``2022``, ``since``, ``昨天``, ``5月2日``).
_TIME_EXPRESSION = re.compile(rf"\b(?:{en.TIME}|{en.ANY_TIME})\b|{zh.TIME}|{zh.ANY_TIME}", re.I)
#: Time expressions that mark an *event* ("yesterday", "last week", "on Monday", "in 2019",
#: "3 days ago", "昨天", "上周", "三天前"): narrower than :func:`has_time_expression` (no bare
#: "last" or "since"), for telling an event from a durable fact.
_EVENT_TIME = re.compile(rf"\b(?:{en.TIME}|{en.EVENT_TIME})\b|{zh.TIME}|{zh.EVENT_TIME}", re.I)


def mentions_event_time(text: str) -> bool:
    """Whether ``text`` places something at a time, as events are told (``"yesterday I met..."``, ``"上周..."``)."""
    return bool(_EVENT_TIME.search(text))


def has_temporal_intent(query: str) -> bool:
    """Whether the question asks for a time (``When ...?``, ``How long ...?``, ``什么时候...？``, ``几号...？``)."""
    return bool(_TEMPORAL_INTENT.search(query))


def has_time_expression(text: str) -> bool:
    """Whether ``text`` mentions a time (``yesterday``, ``last week``, ``in May``, ``2022``, ``昨天``, ``5月2日``)."""
    return bool(_TIME_EXPRESSION.search(text))
