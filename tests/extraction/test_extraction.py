"""Extraction with a (scripted) LLM and offline with spaCy, jieba and the no-spaCy fallback."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from pydantic import Field

from llama_index_memory_hierarchy import extraction
from llama_index_memory_hierarchy.extraction import (
    USER_ENTITY,
    LLMExtractor,
    OfflineExtractor,
    default_extractor,
    load_spacy,
    normalize_predicate,
)
from llama_index_memory_hierarchy.extraction.english import model as spacy_model


class ScriptedLLM(CustomLLM):
    """Answers every prompt with the JSON scripted for the first key found in it."""

    script: dict[str, Any] = Field(default_factory=dict)
    calls: int = 0
    active: int = 0
    peak: int = 0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted-1")

    def _answer(self, prompt: str) -> str:
        for key, value in self.script.items():
            if key in prompt:
                if value == "boom":
                    raise RuntimeError("LLM down")
                return json.dumps(value)
        return json.dumps({"triplets": []})

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.calls += 1
        return CompletionResponse(text=self._answer(prompt))

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.calls += 1
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(0.01)
            return CompletionResponse(text=self._answer(prompt))
        finally:
            self.active -= 1

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt)


def facts_of(result: extraction.Extraction) -> set[tuple[str, str, str]]:
    return {(f.subject, f.predicate, f.object) for f in result.facts}


async def test_llm_structured_output_batched_with_bounded_concurrency() -> None:
    triplet = {"subject": "Alice", "predicate": "works at", "object": "Acme", "confidence": 0.95}
    llm = ScriptedLLM(
        script={f"text number {i}": {"triplets": [{**triplet, "object": f"Acme {i}"}]} for i in range(8)}
        | {"I am vegetarian": {"triplets": [{"subject": "I", "predicate": "diet", "object": "vegetarian"}]}}
    )
    extractor = LLMExtractor(llm, max_concurrency=2)
    texts = [f"text number {i}: Alice works at Acme {i}." for i in range(8)]
    results = await extractor.aextract_many([*texts, "I am vegetarian"])
    assert [facts_of(r) for r in results[:8]] == [{("Alice", "works_at", f"Acme {i}")} for i in range(8)]
    assert facts_of(results[8]) == {(USER_ENTITY, "diet", "vegetarian")}
    fact = results[0].facts[0]
    assert fact.extractor == "llm:scripted-1"
    assert fact.confidence == pytest.approx(0.95)
    assert results[8].facts[0].confidence == pytest.approx(extraction.CONFIDENCE_LLM)
    assert llm.calls == 9
    assert llm.peak <= 2


async def test_llm_failure_falls_back_to_offline(caplog: pytest.LogCaptureFixture) -> None:
    llm = ScriptedLLM(script={"Bob knows Carol": "boom"})
    with caplog.at_level(logging.WARNING):
        [result] = await default_extractor(llm).aextract_many(["Bob knows Carol."])
    assert "offline extractor" in caplog.text
    assert facts_of(result) == {("Bob", "knows", "Carol")}
    assert result.facts[0].extractor == "spacy"


async def test_spacy_dependency_patterns() -> None:
    pytest.importorskip("spacy")
    texts = [
        "Alice is Bob's wife.",
        "Alice Chen works with Bob at Acme Corp.",
        "Paris is the capital of France.",
        "I live in Berlin and I prefer short answers.",
        "Tom, Alice's brother, is a doctor.",
        "My sister Jane moved to Tokyo.",
        "Bob does not like Carol.",
    ]
    results = await OfflineExtractor().aextract_many(texts)
    assert facts_of(results[0]) == {("Alice", "spouse", "Bob")}
    assert ("Alice Chen", "works_at", "Acme Corp") in facts_of(results[1])
    assert facts_of(results[2]) == {("Paris", "capital_of", "France")}
    assert facts_of(results[3]) == {(USER_ENTITY, "lives_in", "Berlin"), (USER_ENTITY, "prefers", "short answers")}
    assert ("Tom", "brother_of", "Alice") in facts_of(results[4])
    assert facts_of(results[5]) == {("Jane", "sister_of", USER_ENTITY), ("Jane", "lives_in", "Tokyo")}
    assert facts_of(results[6]) == {("Bob", "does_not_like", "Carol")}  # negated: kept, never its opposite
    assert {e.name for e in results[1].entities} >= {"Alice Chen", "Bob", "Acme Corp"}
    for result in results:
        for fact in result.facts:
            assert fact.extractor == "spacy"
            assert fact.confidence < extraction.CONFIDENCE_LLM


async def test_jieba_chinese_entities_and_relations() -> None:
    [result] = await OfflineExtractor().aextract_many(["爱丽丝是鲍勃的妻子。张伟在北京的阿里巴巴工作。我住在上海。"])
    facts = facts_of(result)
    assert ("爱丽丝", "spouse", "鲍勃") in facts
    assert ("张伟", "works_at", "阿里巴巴") in facts
    assert (USER_ENTITY, "lives_in", "上海") in facts
    assert {"爱丽丝", "鲍勃", "张伟", "北京", "上海"} <= {e.name for e in result.entities}
    assert all(f.extractor == "jieba" for f in result.facts)
    assert not [f for f in result.facts if f.predicate == "related_to"]  # co-occurrence is no fact


async def test_without_spacy_capitalised_phrases(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(spacy_model, "_spacy_nlp", None)
    monkeypatch.setattr(spacy_model, "_spacy_failed", False)
    monkeypatch.setattr(spacy_model, "SPACY_MODELS", ("no_such_model_xyz",))
    with caplog.at_level(logging.WARNING):
        [result] = await OfflineExtractor().aextract_many(["Alice Chen works at Acme Corp in Paris. I live in Berlin."])
    assert "falls back to capitalised phrases" in caplog.text
    assert {"Alice Chen", "Acme Corp", "Paris", "Berlin"} <= {e.name for e in result.entities}
    assert ("Alice Chen", "works_at", "Acme Corp") in facts_of(result)
    assert (USER_ENTITY, "lives_in", "Berlin") in facts_of(result)
    assert {f.extractor for f in result.facts} == {"regex"}


def test_predicate_normalisation() -> None:
    assert normalize_predicate("Works At") == "works_at"
    assert normalize_predicate("live_in") == "lives_in"
    assert normalize_predicate("wife of") == "spouse"
    assert normalize_predicate("  !! ") == "related_to"


# ---------------------------------------------------------------------------- issue 15 regressions
ISSUE_EXAMPLES = {
    "My manager Li Si asked me to automate our weekly Excel sales report.": {
        ("Li Si", "manager_of", USER_ENTITY),
        (USER_ENTITY, "asked_to_automate", "weekly Excel sales report"),
    },
    "Tom asked me to fix the bug.": {(USER_ENTITY, "asked_to_fix", "bug")},
    "My boss Wang Wu told me to email the client.": {
        ("Wang Wu", "boss_of", USER_ENTITY),
        (USER_ENTITY, "asked_to_email", "client"),
    },
    "I no longer work at Google.": {(USER_ENTITY, "does_not_work_at", "Google")},
    "I don't like coffee.": {(USER_ENTITY, "does_not_like", "coffee")},
    "I'm not vegetarian.": {(USER_ENTITY, "is_not", "vegetarian")},
    "I never drink alcohol.": {(USER_ENTITY, "does_not_drink", "alcohol")},
    "I'm allergic to peanuts.": {(USER_ENTITY, "is_allergic_to", "peanuts")},
    "I work as a data engineer at Acme.": {
        (USER_ENTITY, "works_as", "data engineer at Acme"),
        (USER_ENTITY, "works_at", "Acme"),
    },
    "Carol is a pilot.": {("Carol", "is", "pilot")},
    "Carol is left-handed.": {("Carol", "is", "left-handed")},
    "Hi! I'm Zhang San. I'm learning Python.": {(USER_ENTITY, "named", "Zhang San"), (USER_ENTITY, "learns", "Python")},
    "I moved to Paris last month, so I live in Paris now.": {(USER_ENTITY, "lives_in", "Paris")},
    "我是张三。": {(USER_ENTITY, "named", "张三")},
    "我叫张三，住在北京。": {(USER_ENTITY, "named", "张三"), (USER_ENTITY, "lives_in", "北京")},
    "我的经理李四让我自动化每周的Excel销售报告。": {
        ("李四", "manager_of", USER_ENTITY),
        (USER_ENTITY, "asked_to_automate", "每周的Excel销售报告"),
    },
    "我已经不在谷歌工作了。": {(USER_ENTITY, "does_not_work_at", "谷歌")},
    "我的经理李四让我把每周的Excel销售报表自动化。": {
        ("李四", "manager_of", USER_ENTITY),
        (USER_ENTITY, "asked_to_automate", "每周的Excel销售报表"),
    },
    "我对花生过敏。": {(USER_ENTITY, "is_allergic_to", "花生")},
    "我吃素，对花生过敏。": {(USER_ENTITY, "is", "素食者"), (USER_ENTITY, "is_allergic_to", "花生")},
    "我不吃素。": {(USER_ENTITY, "is_not", "素食者")},
    "How are you today?": set(),
    "I'm so tired today.": set(),
    "If it rains, I will stay home.": set(),
    "你吃饭了吗？": set(),
}


async def test_issue_examples_yield_the_right_facts_offline() -> None:
    pytest.importorskip("spacy")
    texts = list(ISSUE_EXAMPLES)
    results = await OfflineExtractor().aextract_many(texts)
    assert {t: facts_of(r) for t, r in zip(texts, results, strict=True)} == ISSUE_EXAMPLES


def test_negated_predicates() -> None:
    assert extraction.negate_predicate("likes") == "does_not_like"
    assert extraction.negate_predicate("works_at") == "does_not_work_at"
    assert extraction.negate_predicate("lives_in") == "does_not_live_in"
    assert extraction.negate_predicate("flies") == "does_not_fly"
    assert extraction.negate_predicate("is") == "is_not"
    assert extraction.negate_predicate("is_allergic_to") == "is_not_allergic_to"
    assert extraction.negate_predicate("has") == "does_not_have"
    assert extraction.negate_predicate("does_not_like") == "does_not_like"
    assert extraction.third_person("fly") == "flies" and extraction.third_person("watch") == "watches"


async def test_llm_reply_without_facts_falls_back_when_the_text_states_some(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("spacy")
    llm = ScriptedLLM(script={"Tom": {"triplets": [{"subject": "Mars", "predicate": "is", "object": "red"}]}})
    extractor = LLMExtractor(llm)
    with caplog.at_level(logging.WARNING):
        [empty, ungrounded, small_talk] = await extractor.aextract_many(
            ["I live in Berlin.", "Tom lives in Oslo.", "Hello there!"]
        )
    assert facts_of(empty) == {(USER_ENTITY, "lives_in", "Berlin")}  # the empty reply was not used
    assert facts_of(ungrounded) == {("Tom", "lives_in", "Oslo")}  # "Mars is red" is not in the text
    assert facts_of(small_talk) == set()
    assert extractor.fallbacks == 2
    assert "using the offline extractor" in caplog.text


async def test_the_user_in_the_third_person_is_the_user_offline() -> None:
    texts = [
        "The user is vegetarian.",
        "The user's daughter is called Mia.",
        "The user asked me to book a table.",  # "me" is the agent writing this, not the user
        "用户住在北京。",
        "用户让我订机票。",  # 我 is the agent writing this
        "I'm Alice. Alice is allergic to peanuts.",
        "我叫王芳。王芳在银行工作。",
        "My name is Ada. Tom is a pilot.",
    ]
    results = await OfflineExtractor().aextract_many(texts)
    assert [facts_of(r) for r in results] == [
        {(USER_ENTITY, "is", "vegetarian")},
        {("Mia", "daughter_of", USER_ENTITY)},
        set(),
        {(USER_ENTITY, "lives_in", "北京")},
        set(),
        {(USER_ENTITY, "named", "Alice"), (USER_ENTITY, "is_allergic_to", "peanuts")},
        {(USER_ENTITY, "named", "王芳"), (USER_ENTITY, "works_at", "银行")},
        {(USER_ENTITY, "named", "Ada"), ("Tom", "is", "pilot")},  # a third person stays theirs
    ]


async def test_llm_path_maps_the_user_and_their_name() -> None:
    llm = ScriptedLLM(
        script={
            "The user lives in Oslo": {
                "triplets": [{"subject": "the user", "predicate": "lives_in", "object": "Oslo"}]
            },
            "The user asked me to": {
                "triplets": [
                    {"subject": "me", "predicate": "asked_to_book", "object": "table"},  # the agent, not the user
                    {"subject": "the user", "predicate": "likes", "object": "window tables"},
                ]
            },
            "用户喜欢绿茶": {"triplets": [{"subject": "用户", "predicate": "likes", "object": "绿茶"}]},
            "I'm Bea. Bea drives a van": {
                "triplets": [
                    {"subject": "I", "predicate": "named", "object": "Bea"},
                    {"subject": "Bea", "predicate": "drives", "object": "van"},
                ]
            },
        }
    )
    results = await LLMExtractor(llm).aextract_many(
        [
            "The user lives in Oslo.",
            "The user asked me to book a table; they like window tables.",
            "用户喜欢绿茶。",
            "I'm Bea. Bea drives a van.",
        ]
    )
    assert [facts_of(r) for r in results] == [
        {(USER_ENTITY, "lives_in", "Oslo")},
        {(USER_ENTITY, "likes", "window tables")},
        {(USER_ENTITY, "likes", "绿茶")},
        {(USER_ENTITY, "named", "Bea"), (USER_ENTITY, "drives", "van")},
    ]


@pytest.mark.parametrize("language", ["en", "zh"])
async def test_the_extraction_set_through_the_llm_path(language: str) -> None:
    """The LLM path on the whole set, with an LLM scripted to name the user as a client would ("the user", 用户)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from extraction_set import llm_script, load, score

    script = llm_script([language])
    examples = load(language)
    result = score(examples, await LLMExtractor(ScriptedLLM(script=script)).aextract_many([e.text for e in examples]))
    assert result.precision >= 0.95, result.wrong
    assert result.recall >= 0.95, result.missed


async def test_a_sentence_of_a_name_alone_names_the_user_but_a_capitalised_word_does_not() -> None:
    if load_spacy() is None:
        pytest.skip("the introduction is read on spaCy's parse")
    texts = ["I'm Petra. Karl is a baker.", "hi, I'm Tariq!", "I'm Retired.", "I'm Single.", "I'm Catholic."]
    petra, tariq, *common = await OfflineExtractor().aextract_many(texts)
    assert {(f.subject, f.predicate, f.object) for f in petra.facts} == {
        ("User", "named", "Petra"),
        ("Karl", "is", "baker"),
    }
    assert [(f.predicate, f.object) for f in tariq.facts] == [("named", "Tariq")]
    assert all(f.predicate != "named" for x in common for f in x.facts)


@pytest.mark.parametrize(
    ("text", "fact"),
    [
        ("我爱看电影。", ("User", "loves", "看电影")),  # jieba's "爱看": the liking's object is the activity
        ("我出生在西安。", ("User", "born_in", "西安")),
        ("我哥哥住在大连。", ("User", "brother_lives_in", "大连")),  # "大连" tagged as an adverb
    ],
)
async def test_chinese_facts_jieba_segments_or_tags_awkwardly(text: str, fact: tuple[str, str, str]) -> None:
    extraction = await OfflineExtractor().aextract(text)
    assert [(f.subject, f.predicate, f.object) for f in extraction.facts] == [fact]


async def test_a_relative_with_a_name_parsed_as_a_second_subject_is_that_person() -> None:
    if load_spacy() is None:
        pytest.skip("read on spaCy's parse")
    extraction = await OfflineExtractor().aextract("My cousin Mira lives in Split.")
    assert {(f.subject, f.predicate, f.object) for f in extraction.facts} == {
        ("Mira", "cousin_of", "User"),
        ("Mira", "lives_in", "Split"),
    }  # not the user's cousin_lives_in, as if the cousin had no name
