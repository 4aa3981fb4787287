"""Unit tests of the retrieval pipeline's pure functions (no store, no model)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llama_index_memory_hierarchy.ranking.fusion import normalise_scores, rrf_fuse, score_fuse
from llama_index_memory_hierarchy.ranking.pipeline import (
    DEFAULT_RECIPE,
    QUERY_STOPWORDS,
    Candidate,
    PipelineRecipe,
    RerankWeights,
    TimeHint,
    entity_boost,
    extract_time_hints,
    has_temporal_intent,
    has_time_expression,
    keyword_query,
    keyword_terms,
    light_stem,
    mentioned_names,
    rank_candidates,
    rerank,
    stem_text,
    time_score,
    tokenize,
)

NOW = datetime(2023, 6, 15, 12, 0, tzinfo=UTC)


# ------------------------------------------------------------------ keyword query
def test_tokenize_drops_punctuation_and_folds_case() -> None:
    assert tokenize("What did Caroline's  kids PAINT?") == ["what", "did", "caroline", "s", "kids", "paint"]


def test_keyword_terms_keep_content_words_in_order() -> None:
    assert keyword_terms("What did Priya study?") == ["priya", "study"]
    assert keyword_terms("When did Melanie paint a sunrise, and when?") == ["melanie", "paint", "sunrise"]


def test_keyword_terms_never_empty() -> None:
    assert keyword_terms("What was it?") == ["what", "was", "it"]
    assert keyword_terms("") == []


def test_question_words_are_stopwords() -> None:
    assert {"what", "when", "did", "her", "his"} <= QUERY_STOPWORDS
    assert "paint" not in QUERY_STOPWORDS


@pytest.mark.parametrize(
    ("words", "same"),
    [
        (["camping", "camped", "camps", "camp"], True),
        (["painting", "paintings", "paint"], True),
        (["making", "make", "makes"], True),
        (["running", "run"], True),
        (["family", "families"], True),
        (["tried", "tries"], True),
        (["paint", "pain"], False),
    ],
)
def test_light_stem_conflates_inflections(words: list[str], same: bool) -> None:
    stems = {light_stem(w) for w in words}
    assert (len(stems) == 1) is same


def test_light_stem_keeps_short_and_numeric_tokens() -> None:
    assert light_stem("bus") == "bus"
    assert light_stem("2023") == "2023"
    assert light_stem("covid19s") == "covid19s"
    assert light_stem("need") == "need"


@given(st.text(max_size=30))
def test_light_stem_is_total_and_idempotent_on_length(word: str) -> None:
    stem = light_stem(word)
    assert isinstance(stem, str)
    assert len(stem) <= len(word) + 1


def test_stem_text_and_keyword_query_meet() -> None:
    assert stem_text("Caroline went camping with her families!") == "carolin went camp with her famili"
    assert keyword_query("Where has Rosa camped?") == "rosa camp"
    assert set(keyword_query("Where has Rosa camped?").split()) <= set(stem_text("Rosa: camping trip").split())


def test_tokenizer_is_pluggable() -> None:
    from llama_index_memory_hierarchy.text import keyword_tokens

    assert stem_text("Ünïcode Cafés", tokenizer=keyword_tokens) == "ünïcode cafés"
    assert keyword_query("What did Zoë paint?", tokenizer=keyword_tokens) == "zoë paint"
    assert keyword_terms("what is x-ray?", tokenizer=str.split) == ["x-ray?"]


# ------------------------------------------------------------------ fusion
def test_rrf_fuse_orders_by_weighted_reciprocal_rank() -> None:
    fused = rrf_fuse([["a", "b", "c"], ["b", "c"]], k=60)
    assert [key for key, _ in fused] == ["b", "c", "a"]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)


def test_rrf_fuse_weights_and_zero_weight() -> None:
    fused = dict(rrf_fuse([["a"], ["b"]], weights=[1.0, 2.0], k=1))
    assert fused["b"] == pytest.approx(1.0) and fused["a"] == pytest.approx(0.5)
    assert [key for key, _ in rrf_fuse([["a"], ["b"]], weights=[1.0, 0.0])] == ["a"]


def test_rrf_fuse_rejects_mismatched_weights() -> None:
    with pytest.raises(ValueError, match="weights"):
        rrf_fuse([["a"]], weights=[1.0, 2.0])


def test_normalise_scores_methods() -> None:
    scores = {"a": 4.0, "b": 2.0, "c": -1.0}
    assert normalise_scores(scores, "max") == {"a": 1.0, "b": 0.5, "c": 0.0}
    assert normalise_scores(scores, "minmax") == {"a": 1.0, "b": pytest.approx(0.6), "c": 0.0}
    assert normalise_scores(scores, "clip") == {"a": 4.0, "b": 2.0, "c": 0.0}
    assert normalise_scores(scores, "none") == scores
    assert normalise_scores({}, "max") == {}
    assert normalise_scores({"a": 0.0}, "max") == {"a": 0.0}
    with pytest.raises(ValueError):
        normalise_scores(scores, "bogus")  # type: ignore[arg-type]


def test_score_fuse_keeps_margins() -> None:
    keyword = {"a": 10.0, "b": 1.0}
    dense = {"a": 0.2, "b": 0.3, "c": 0.9}
    fused = score_fuse([keyword, dense], [1.0, 1.0], normalise=["max", "clip"])
    assert dict(fused) == {"a": pytest.approx(1.2), "c": pytest.approx(0.9), "b": pytest.approx(0.4)}
    assert [k for k, _ in fused] == ["a", "c", "b"]


def test_score_fuse_validates_lengths() -> None:
    with pytest.raises(ValueError):
        score_fuse([{"a": 1.0}], [1.0, 1.0])
    with pytest.raises(ValueError):
        score_fuse([{"a": 1.0}], normalise=["max", "clip"])


# ------------------------------------------------------------------ indexed text
def _spans(query: str, now: datetime | None = NOW) -> list[tuple[str, str, str]]:
    return [
        (h.start.date().isoformat(), h.end.date().isoformat(), h.granularity) for h in extract_time_hints(query, now)
    ]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did Omar bake for Lena on 25 May, 2022?", [("2022-05-25", "2022-05-26", "day")]),
        ("What painting did Melanie show on October 13, 2023?", [("2023-10-13", "2023-10-14", "day")]),
        ("Where was the forest picture shared on December 1,2023 taken?", [("2023-12-01", "2023-12-02", "day")]),
        ("What happened on the 3rd of March 2021?", [("2021-03-03", "2021-03-04", "day")]),
        ("Where did Lena fly to in July 2022?", [("2022-07-01", "2022-08-01", "month")]),
        ("Which island did Lena tour in summer 2021?", [("2021-06-01", "2021-09-01", "season")]),
        ("When did Omar sprain his wrist in 2023?", [("2023-01-01", "2024-01-01", "year")]),
        ("Meeting on 2023-02-30 or 2023-02-28?", [("2023-02-28", "2023-03-01", "day")]),
        ("Which beach did Lena visit in May?", [("2023-05-01", "2023-06-01", "month")]),
        ("What did she write yesterday?", [("2023-06-14", "2023-06-15", "day")]),
        ("What did we do last month?", [("2023-05-01", "2023-06-01", "month")]),
        ("Plans for next year?", [("2024-01-01", "2025-01-01", "year")]),
        ("What did we do last week?", [("2023-06-05", "2023-06-12", "week")]),
        ("What happened last weekend?", [("2023-06-10", "2023-06-12", "day")]),
        ("What did I buy two weeks ago?", [("2023-05-30", "2023-06-03", "week")]),
        ("What did Priya study?", []),
        ("Who may come to the party?", []),
    ],
)
def test_extract_time_hints(query: str, expected: list[tuple[str, str, str]]) -> None:
    assert _spans(query) == expected


def test_relative_expressions_need_now() -> None:
    assert _spans("What did she write yesterday in May?", None) == []
    assert _spans("In 2022, yesterday", None) == [("2022-01-01", "2023-01-01", "year")]


def test_month_alone_in_the_past_year() -> None:
    assert _spans("What happened in December?") == [("2022-12-01", "2023-01-01", "month")]


def test_naive_now_is_utc() -> None:
    assert _spans("yesterday", datetime(2023, 6, 15, 12)) == [("2023-06-14", "2023-06-15", "day")]


def test_time_score_inside_near_and_far() -> None:
    hints = extract_time_hints("on 8 May, 2023")
    inside = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert time_score(inside, hints) == 1.0
    before = time_score(inside - timedelta(days=4), hints)
    after = time_score(inside + timedelta(days=4), hints)
    assert 0 < before < after < 1  # told later decays slower than before
    assert time_score(inside + timedelta(days=400), hints) < 1e-6
    assert time_score(inside, []) == 0.0
    assert time_score(datetime(2023, 5, 8, 1), hints) == 1.0  # naive = UTC


def test_time_score_falls_off_by_the_width_of_its_hint() -> None:
    """One e-fold per width of the hint: a day off "on 8 May" is far, a day off "in May" is near."""
    day = extract_time_hints("on 8 May, 2023")
    month = extract_time_hints("in May 2023")
    eve = datetime(2023, 4, 30, tzinfo=UTC)  # a day before the day hint's start, and the month's
    assert time_score(datetime(2023, 5, 7, tzinfo=UTC), day) == pytest.approx(math.exp(-1.0))
    assert time_score(eve, month) == pytest.approx(math.exp(-1.0 / 31.0))
    assert time_score(datetime(2023, 5, 9, 12, tzinfo=UTC), day) == pytest.approx(math.exp(-0.5))  # told later


def test_time_score_counts_whole_days() -> None:
    """A hint holds no time of day: the day before "on 8 May" is a day off at noon and just before midnight."""
    day = extract_time_hints("on 8 May, 2023")
    for hour, minute in ((0, 0), (12, 0), (23, 59)):
        eve = datetime(2023, 5, 7, hour, minute, tzinfo=UTC)
        assert time_score(eve, day) == pytest.approx(math.exp(-1.0))
    assert time_score(datetime(2023, 5, 6, 12, tzinfo=UTC), day) == pytest.approx(math.exp(-2.0))


def test_a_date_without_a_year_matches_that_day_of_any_year() -> None:
    """ "On May 2nd" asked in 2026 is answered by a memory of 2 May 2023: the day of the year, not the clock's year."""
    asked = datetime(2026, 12, 1, tzinfo=UTC)
    for query in ("What did I see on May 2nd?", "我5月2日看了什么？"):
        hints = extract_time_hints(query, asked)
        assert time_score(datetime(2023, 5, 2, 12, tzinfo=UTC), hints) == 1.0
        assert time_score(datetime(2023, 5, 20, 12, tzinfo=UTC), hints) < 0.2
    dated = extract_time_hints("What did I see on May 2nd, 2025?", asked)
    assert time_score(datetime(2023, 5, 2, 12, tzinfo=UTC), dated) < 1e-6  # a year named is kept
    december = extract_time_hints("on December 31", datetime(2024, 1, 5, tzinfo=UTC))
    assert time_score(datetime(2023, 12, 31, 20, tzinfo=UTC), december) == 1.0


def test_time_score_takes_the_best_hint() -> None:
    hints = [
        TimeHint(datetime(2022, 1, 1, tzinfo=UTC), datetime(2022, 1, 2, tzinfo=UTC), "day"),
        TimeHint(datetime(2023, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC), "year"),
    ]
    assert time_score(datetime(2023, 7, 1, tzinfo=UTC), hints) == 1.0


@pytest.mark.parametrize(
    ("query", "temporal"),
    [
        ("When did Priya go to the chess club?", True),
        ("How long has Tim been playing the piano?", True),
        ("In what year did Jon open his studio?", True),
        ("Which month was Omar in Peru?", True),
        ("What did Priya study?", False),
        ("Where has Rosa camped?", False),
    ],
)
def test_has_temporal_intent(query: str, temporal: bool) -> None:
    assert has_temporal_intent(query) is temporal


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went to a support group yesterday.", True),
        ("We moved here 3 years ago.", True),
        ("Last week I ran a charity race.", True),
        ("It was in May, so lovely.", True),
        ("Back in 2019 I started.", True),
        ("I love painting sunsets.", False),
    ],
)
def test_has_time_expression(text: str, expected: bool) -> None:
    assert has_time_expression(text) is expected


# ------------------------------------------------------------------ entities
def test_mentioned_names_whole_words_and_possessives() -> None:
    names = {"Caroline", "Mel", "Jon Snow"}
    assert mentioned_names("What is Caroline's hometown?", names) == {"Caroline"}
    assert mentioned_names("Did Melanie paint?", names) == set()  # "Mel" inside a word does not count
    assert mentioned_names("Where did jon snow go?", names) == {"Jon Snow"}
    assert mentioned_names("Anyone?", {""}) == set()


def test_entity_boost() -> None:
    assert entity_boost("Caroline", "I went out", {"Caroline"}) == 1.0
    assert entity_boost("Melanie", "Caroline came too", {"Caroline"}) == 0.5
    assert entity_boost("Melanie", "I went out", {"Caroline"}) == 0.0
    assert entity_boost("Melanie", "Caroline", set()) == 0.0


# ------------------------------------------------------------------ rerank
def test_rerank_applies_each_prior() -> None:
    may = datetime(2023, 5, 8, tzinfo=UTC)
    jan = datetime(2023, 1, 8, tzinfo=UTC)
    candidates = {
        "a": Candidate("a", "I like hiking", "Melanie", jan),
        "b": Candidate("b", "I like hiking", "Caroline", jan),
        "c": Candidate("c", "I went hiking yesterday", "Melanie", jan),
        "d": Candidate("d", "I like hiking", "Melanie", may),
    }
    fused = [("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", 1.0), ("x", 0.5)]
    only = RerankWeights(entity=0.3, time=0.0, temporal=0.0)
    assert rerank("What does Caroline like?", fused, candidates, weights=only)[0] == ("b", pytest.approx(1.3))
    only = RerankWeights(entity=0.0, time=0.0, temporal=0.5)
    assert rerank("When did they hike?", fused, candidates, weights=only)[0] == ("c", pytest.approx(1.5))
    only = RerankWeights(entity=0.0, time=1.0, temporal=0.0)
    assert rerank("Who hiked in May 2023?", fused, candidates, weights=only, now=NOW)[0][0] == "d"
    out = rerank("nothing to boost", fused, candidates)
    assert out == sorted(fused, key=lambda kv: kv[1], reverse=True)
    assert ("x", 0.5) in out


def test_rerank_accepts_given_hints_and_names() -> None:
    when = datetime(2023, 5, 8, tzinfo=UTC)
    candidates = {"a": Candidate("a", "hello", "Ann", when), "b": Candidate("b", "hello", "Bob", when)}
    hint = TimeHint(when, when + timedelta(days=1), "day")
    out = rerank("what did bob say?", [("a", 1.0), ("b", 0.9)], candidates, names=["Bob"], time_hints=[hint])
    assert out[0][0] == "b"


def test_pipeline_functions_work_on_numpy_scores() -> None:
    scores = np.array([3.0, 1.0, 0.0], dtype=np.float32)
    fused = score_fuse([{i: float(s) for i, s in enumerate(scores)}])
    assert [k for k, _ in fused] == [0, 1, 2]


def test_rank_candidates_is_fusion_then_priors() -> None:
    when = datetime(2023, 5, 8, tzinfo=UTC)
    candidates = {
        1: Candidate(1, "I like tea", "Ann", when),
        2: Candidate(2, "I like coffee", "Bob", when),
        3: Candidate(3, "tea time", "Ann", when),
    }
    keyword = {1: 8.0, 3: 4.0}
    dense = {1: 0.3, 2: 0.6, 3: 0.5}
    ranked = rank_candidates("What does Bob like?", keyword, dense, candidates)
    fused = score_fuse([keyword, dense], normalise=["max", "clip"])
    assert ranked == rerank("What does Bob like?", fused, candidates, weights=DEFAULT_RECIPE.rerank)
    assert [k for k, _ in ranked] == [1, 3, 2]  # 1.3, 1.0, then 0.6 boosted by 1.3 for Bob
    keyword_only = PipelineRecipe(dense_weight=0.0, rerank=RerankWeights(0, 0, 0))
    assert [k for k, _ in rank_candidates("tea", keyword, dense, candidates, recipe=keyword_only)][:2] == [1, 3]


def test_a_question_naming_one_chat_party_boosts_that_partys_turns_as_a_named_speaker() -> None:
    when = datetime(2023, 5, 8, tzinfo=UTC)
    candidates = {
        "echo": Candidate("echo", "Which cuisines do you like?", "assistant", when, party="assistant"),
        "answer": Candidate("answer", "I like Sichuan food.", "user", when, party="user"),
        "note": Candidate("note", "Sichuan food list", None, when),
    }
    fused = [("echo", 1.0), ("answer", 0.9), ("note", 0.9)]
    ranked = dict(rerank("Which cuisines do I like?", fused, candidates))
    assert ranked == pytest.approx({"echo": 1.0, "answer": 0.9 * 1.3, "note": 0.9})
    # both named: the subject of the question, here the assistant
    assert dict(rerank("Which cuisines did you list for me?", fused, candidates)) == pytest.approx(
        {"echo": 1.0 * 1.3, "answer": 0.9, "note": 0.9}
    )
    assert dict(rerank("Which cuisines did we talk about?", fused, candidates)) == dict(fused)  # both at once
