"""Language-aware analysis (``language.py``): detection, keyword analysis, time hints and names, Chinese and English.

Everything runs on the real libraries (jieba, PyStemmer, dateparser, spaCy's small English
model); the time hints are checked against a fixed event time.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from llama_index_memory_hierarchy import language as L

NOW = datetime(2023, 5, 10, 15, 0, tzinfo=UTC)  # a Wednesday


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我喜欢吃辣的川菜", "zh"),
        ("我在学Python", "zh"),
        ("My manager Lee asked me for a report", "en"),
        ("I love 川菜 and Sichuan pepper", "en"),
        ("カタカナとひらがな", "ja"),
        ("12345 !!", "und"),
        ("", "und"),
    ],
)
def test_detect_language_by_script(text: str, expected: str) -> None:
    assert L.detect_language(text) == expected


def test_keyword_analysis_segments_chinese_and_stems_english() -> None:
    terms = L.index_terms("I went camping with my friends 我喜欢吃辣的川菜")
    assert {"camp", "friend", "川菜", "喜欢"} <= set(terms)
    assert L.index_terms("camped") == L.index_terms("camping") == ["camp"]
    assert L.stem("2023") == "2023" and L.stem("川菜") == "川菜"
    # the index and its queries meet on the same terms (one analysis for both)
    query = [L.stem(t) for t in L.query_terms("What did I say about camping?")]
    assert "camp" in query and "camp" in L.index_terms("We camped by the lake")


def test_query_terms_drop_stop_words_in_both_languages() -> None:
    assert L.query_terms("What did Priya study?") == ["priya", "study"]
    assert L.query_terms("我的经理是谁？") == ["经理"]
    assert "学习" in L.query_terms("你还记得我的学习进度吗？")
    assert L.query_terms("What was it?") == ["what", "was", "it"]  # never empty
    mixed = L.query_terms("我的Python学习进度")
    assert "python" in mixed and "学习" in mixed


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


def test_names_in_chinese_and_english() -> None:
    assert L.mentioned_names("张三喜欢什么？", ["张三", "李四", "AI"]) == {"张三"}
    assert L.mentioned_names("What did Odile's dog do?", ["Odile", "Tom"]) == {"Odile"}
    assert L.mentioned_names("Where is Tomsk?", ["Tom"]) == set()  # not inside another word
    assert "李四" in L.person_names("我的经理李四让我写周报")
    assert "Tom" in L.person_names("Yesterday I told Tom about the trip.")
    assert L.person_names("我喜欢吃辣的川菜") == []


@pytest.mark.parametrize(
    "question, party",
    [
        ("What kind of tea do I drink?", "user"),
        ("What's my favourite scene?", "user"),
        ("我最喜欢哪种花？", "user"),
        ("Which books did you recommend?", "assistant"),
        ("您建议去哪里徒步？", "assistant"),
        # both parties: the subject of the last clause naming one, a request to recall set aside
        ("Which film did you suggest to me?", "assistant"),
        ("你给我推荐了哪本书？", "assistant"),
        ("我曾经和你分享过一部电影，它的名字是？", "user"),
        ("On May 4th, I asked you about a gift. Which present did you suggest to me?", "assistant"),
        ("I mentioned a museum. Do you remember what exhibition I saw?", "user"),
        ("你还记得我当时买了什么花吗？", "user"),
        ("你之前给我推荐过几部电影，你还记得是哪几部吗？", "assistant"),
        ("Do you remember our trip?", None),
        ("What topics did we talk about?", None),  # plurals name more than one party
        ("我们聊了哪些话题？", None),
        ("你们那里冷吗？", None),
        ("Where does Alice live?", None),
    ],
)
def test_named_chat_party_is_the_party_a_question_is_about_by_pronoun(question: str, party: str | None) -> None:
    assert L.named_chat_party(question) == party


def test_statements_are_the_sentences_that_are_not_questions() -> None:
    assert L.statements("Gardening is a calm hobby. Which plants do you grow?") == "Gardening is a calm hobby."
    assert L.statements("今天很累。你有什么放松的方法吗？") == "今天很累。"
    assert L.statements("Did you see it? Yes, twice.") == "Yes, twice."
    assert L.statements("你喜欢哪种茶呢？") == ""


def test_a_question_states_the_clauses_in_which_its_speaker_speaks_of_itself() -> None:
    assert L.statements("那太好了，我很喜欢爬山和骑车，你也喜欢户外吗？") == "我很喜欢爬山和骑车，"
    assert L.statements("I love chess, do you?") == "I love chess,"
    assert L.statements("If you had to choose, which would you pick?") == ""  # its "you" is the one asked
    assert L.statements("What should I pack?") == ""  # the last clause of a question asks, whoever it names


def test_without_self_statements_drops_what_a_speaker_says_of_itself() -> None:
    assert L.without_self_statements("那太好了，我很喜欢爬山，你也喜欢户外吗？") == "那太好了， 你也喜欢户外吗？"
    assert L.without_self_statements("I went to a pottery class. What about you?") == "What about you?"
    said_of_the_other = "Congrats on your promotion! How did it feel?"
    assert L.without_self_statements(said_of_the_other) == said_of_the_other


def test_a_text_asks_when_one_of_its_sentences_is_a_question() -> None:
    assert L.asks("Congrats on the promotion! How did you feel?")
    assert L.asks("这本书讲的是什么呢？")
    assert L.asks("Really?\nTell me more.")
    assert not L.asks("I got promoted. It feels great!")
    assert not L.asks("我喜欢巴赫。")


def test_a_latin_name_against_han_characters_is_a_word_of_its_own() -> None:
    assert L.mentioned_names("Bob周末喜欢做什么运动？", ["Bob", "Ann"]) == {"Bob"}
    assert L.named_chat_party("you觉得呢") == "assistant"


def test_one_sentence_splitter_keeps_numbers_whole_and_splits_chinese_after_ascii_marks() -> None:
    assert L.split_sentences("The kettle costs 3.5 euros. I bought two.") == [
        "The kettle costs 3.5 euros.",
        "I bought two.",
    ]
    assert L.split_sentences("太好了!我下周去杭州。你呢？") == ["太好了!", "我下周去杭州。", "你呢？"]
    assert L.split_sentences("不要用表情；回答简短") == ["不要用表情；回答简短"]
    assert L.split_sentences("不要用表情；回答简短", semicolons=True) == ["不要用表情；", "回答简短"]


def test_one_han_range_and_one_pronoun_list_for_both_languages() -> None:
    assert all(L.HAN_CHAR.match(ch) for ch in "汉々〇𠀀")  # an extension-B character too
    assert {"i", "me", "我"} <= L.FIRST_PERSON and {"you", "你", "您"} <= L.SECOND_PERSON
    assert {"she", "他"} <= L.THIRD_PERSON and "我们" in L.FIRST_PERSON_PLURAL
    assert L.named_chat_party("您还记得我养的猫叫什么吗？") == "user"
    assert L.named_chat_party("你们周末去哪里了？") is None  # a plural names more than one party
