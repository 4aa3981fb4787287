"""Names (``language.names``): the names a query mentions and the people a text names.

Everything runs on the real libraries (jieba, PyStemmer, dateparser, spaCy's small English model)."""

from __future__ import annotations

from llama_index_memory_hierarchy import language as L


def test_names_in_chinese_and_english() -> None:
    assert L.mentioned_names("张三喜欢什么？", ["张三", "李四", "AI"]) == {"张三"}
    assert L.mentioned_names("What did Odile's dog do?", ["Odile", "Tom"]) == {"Odile"}
    assert L.mentioned_names("Where is Tomsk?", ["Tom"]) == set()  # not inside another word
    assert "李四" in L.person_names("我的经理李四让我写周报")
    assert "Tom" in L.person_names("Yesterday I told Tom about the trip.")
    assert L.person_names("我喜欢吃辣的川菜") == []


def test_a_latin_name_against_han_characters_is_a_word_of_its_own() -> None:
    assert L.mentioned_names("Bob周末喜欢做什么运动？", ["Bob", "Ann"]) == {"Bob"}
    assert L.named_chat_party("you觉得呢") == "assistant"
