"""Time in text (``language.dates``): dates and periods against a fixed event time, in both languages.

Everything runs on the real libraries (jieba, PyStemmer, dateparser, spaCy's small English model)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from llama_index_memory_hierarchy import language as L

NOW = datetime(2023, 5, 10, 15, 0, tzinfo=UTC)  # a Wednesday


def _spans(text: str) -> list[tuple[str, str, str]]:
    hints = L.extract_time_hints(text, NOW)
    return [(h.start.date().isoformat(), h.end.date().isoformat(), h.granularity) for h in hints]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我上周说过什么？", [("2023-05-01", "2023-05-08", "week")]),
        ("5月2日我去了哪里？", [("2023-05-02", "2023-05-03", "day")]),
        ("三天前我们聊了什么", [("2023-05-07", "2023-05-08", "day")]),
        ("昨天晚上我吃了什么", [("2023-05-09", "2023-05-10", "day")]),
        ("我上个月去了哪里", [("2023-04-01", "2023-05-01", "month")]),
        ("2022年12月31日", [("2022-12-31", "2023-01-01", "day")]),
        ("我的经理是谁？", []),
        ("What did I do last week?", [("2023-05-01", "2023-05-08", "week")]),
        ("on 6 May, 2023", [("2023-05-06", "2023-05-07", "day")]),
        ("What did I tell you on May 2nd?", [("2023-05-02", "2023-05-03", "day")]),
        ("On 4 May we talked about books", [("2023-05-04", "2023-05-05", "day")]),
        ("the 29th of April", [("2023-04-29", "2023-04-30", "day")]),
        ("What did we talk about on June 5?", [("2022-06-05", "2022-06-06", "day")]),  # the latest 5 June
        ("I may 2 go there", []),  # "may" the verb
    ],
)
def test_time_hints_relative_to_the_event_time(text: str, expected: list[tuple[str, str, str]]) -> None:
    assert _spans(text) == expected


def test_a_date_without_a_year_is_marked_and_moves_to_any_year() -> None:
    [day] = L.extract_time_hints("5月2日我去了哪里？", NOW)
    [english] = L.extract_time_hints("on May 2nd", NOW)
    assert day.yearless and english.yearless and day.start == english.start
    assert day.in_year(2020) is not None and day.in_year(2020).start.year == 2020
    [full] = L.extract_time_hints("2023年5月2日", NOW)
    assert not full.yearless
    [leap] = L.extract_time_hints("2月29日", NOW)  # the latest 29 February before 10 May 2023: 2020
    assert leap.start.year == 2020 and leap.in_year(2021) is None


def test_relative_time_needs_an_event_time() -> None:
    assert L.extract_time_hints("我上周说过什么？") == []
    assert [h.granularity for h in L.extract_time_hints("2023年5月2日我做了什么")] == ["day"]


def test_temporal_intent_and_time_expressions_in_both_languages() -> None:
    assert L.has_temporal_intent("我什么时候开始学Python的？")
    assert L.has_temporal_intent("When did Mel paint a sunrise?")
    assert not L.has_temporal_intent("我的经理是谁？")
    assert L.has_time_expression("我昨天去了长城") and L.has_time_expression("三天前")
    assert not L.has_time_expression("我喜欢吃辣的川菜")
    assert L.mentions_event_time("上周我去了北京") and L.mentions_event_time("Yesterday I met Tom")
    assert not L.mentions_event_time("我是一名程序员") and not L.mentions_event_time("My last name is Smith")
