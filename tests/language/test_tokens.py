"""Keyword analysis (``language.tokens``): Chinese segmented, English stemmed, a question's content words.

Everything runs on the real libraries (jieba, PyStemmer, dateparser, spaCy's small English model)."""

from __future__ import annotations

from llama_index_memory_hierarchy import language as L


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
