"""Sentences (``language.sentences``): the one sentence splitter and questions."""

from __future__ import annotations

from llama_index_memory_hierarchy import language as L


def test_a_text_asks_when_one_of_its_sentences_is_a_question() -> None:
    assert L.asks("Congrats on the promotion! How did you feel?")
    assert L.asks("这本书讲的是什么呢？")
    assert L.asks("Really?\nTell me more.")
    assert not L.asks("I got promoted. It feels great!")
    assert not L.asks("我喜欢巴赫。")


def test_one_sentence_splitter_keeps_numbers_whole_and_splits_chinese_after_ascii_marks() -> None:
    assert L.split_sentences("The kettle costs 3.5 euros. I bought two.") == [
        "The kettle costs 3.5 euros.",
        "I bought two.",
    ]
    assert L.split_sentences("太好了!我下周去杭州。你呢？") == ["太好了!", "我下周去杭州。", "你呢？"]
    assert L.split_sentences("不要用表情；回答简短") == ["不要用表情；回答简短"]
    assert L.split_sentences("不要用表情；回答简短", semicolons=True) == ["不要用表情；", "回答简短"]


def test_sentence_ends_are_where_the_splitter_cuts() -> None:
    from llama_index_memory_hierarchy.language import sentence_ends, split_sentences

    text = "The kettle costs 3.5 euros. It boils fast! 真的吗？好的"
    ends = sentence_ends(text)
    assert text[: ends[0]] == "The kettle costs 3.5 euros."  # not cut inside "3.5"
    assert [text[a:b].strip() for a, b in zip([0, *ends], [*ends, len(text)], strict=True)] == split_sentences(text)
