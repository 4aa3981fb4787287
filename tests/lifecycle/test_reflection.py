"""Reflection: triggered by the summed importance of new events; the LLM writes insights citing
their sources, stored in semantic memory; without an LLM it is skipped (or heuristic, labelled)."""

from __future__ import annotations

import json
import logging

from lifecycle_llm import REFLECTION, ScriptedLLM

from llama_index_memory_hierarchy.lifecycle.settings import LifecycleSettings

EVENTS = [
    ("Ran 10 km along the river before work.", 0.7),
    ("Signed up for the Berlin half marathon in April.", 0.9),
    ("Bought new running shoes.", 0.5),
    ("Skipped dessert to stay in shape for the race.", 0.6),
    ("Asked a colleague about interval training.", 0.6),
]


def stock(memory) -> list[str]:
    return [memory.manager.add_memory(text, "episodic", importance) for text, importance in EVENTS]


def insights_of(memory) -> list:
    items = memory.semantic.runtime.run(memory.semantic.aquery())
    return [i for i in items if i.metadata.get("origin") == "reflection"]


def test_below_the_threshold_nothing_happens(memory_factory) -> None:
    llm = ScriptedLLM(rules=[(REFLECTION, "{}")])
    memory = memory_factory(llm=llm, lifecycle=LifecycleSettings(reflection_threshold=10.0))
    stock(memory)
    report = memory.manager.reflect()
    assert not report.triggered and report.importance_sum == 3.3 and report.events == 5
    assert llm.prompts == []


def test_llm_insights_cite_their_sources(memory_factory) -> None:
    reply = {
        "insights": [
            {"insight": "The user is training seriously for a half marathon.", "sources": [1, 2, 5]},
            {"insight": "The user watches their diet for the race.", "sources": [4, 99]},
            {"insight": ""},
        ]
    }
    llm = ScriptedLLM(rules=[(REFLECTION, json.dumps(reply))])
    memory = memory_factory(llm=llm, lifecycle=LifecycleSettings(reflection_threshold=3.0, reflection_insights=3))
    ids = stock(memory)
    report = memory.manager.reflect()
    assert report.triggered and report.method == "llm" and report.importance_sum == 3.3
    [prompt] = llm.prompts_with(REFLECTION)
    for number, (text, _) in enumerate(EVENTS, start=1):
        assert f"{number}. {text}" in prompt
    assert "What 3 high-level insights" in prompt
    insights = {i.content: i for i in insights_of(memory)}
    assert set(insights) == {
        "The user is training seriously for a half marathon.",
        "The user watches their diet for the race.",
    }
    assert insights["The user is training seriously for a half marathon."].metadata["source_ids"] == sorted(
        [ids[0], ids[1], ids[4]]
    )
    assert insights["The user watches their diet for the race."].metadata["source_ids"] == [ids[3]]
    assert insights["The user is training seriously for a half marathon."].importance == 0.9
    assert set(report.insights) == {i.id for i in insights.values()}

    again = memory.manager.reflect()  # the events were reflected upon
    assert not again.triggered and again.events == 0
    memory.manager.add_memory("Finished the half marathon in 1:52.", "episodic", 0.95)
    assert memory.manager.reflect().importance_sum == 0.95


def test_consolidation_runs_reflection_when_due(memory_factory) -> None:
    reply = {"insights": [{"insight": "The user loves running.", "sources": [1]}]}
    llm = ScriptedLLM(rules=[(REFLECTION, json.dumps(reply)), ("You consolidate", '{"facts": []}')])
    memory = memory_factory(llm=llm, lifecycle=LifecycleSettings(reflection_threshold=3.0))
    stock(memory)
    report = memory.manager.consolidate()
    assert report.reflection is not None and report.reflection.insights
    assert [i.content for i in insights_of(memory)] == ["The user loves running."]


def test_without_an_llm_reflection_is_skipped_and_says_so(memory_factory, caplog) -> None:
    memory = memory_factory(lifecycle=LifecycleSettings(reflection_threshold=3.0))
    stock(memory)
    with caplog.at_level(logging.INFO, logger="llama_index_memory_hierarchy.lifecycle.reflection"):
        report = memory.manager.reflect()
    assert report.triggered and report.insights == [] and "no LLM configured" in report.skipped
    assert "reflection for alice skipped: no LLM configured" in caplog.text
    assert insights_of(memory) == []
    assert memory.manager.reflect().triggered  # nothing was marked: a later LLM can still reflect


def test_offline_heuristic_insights_are_labelled(memory_factory) -> None:
    settings = LifecycleSettings(reflection_threshold=1.0, offline_reflection=True)
    first = memory_factory(session_id="mon", lifecycle=settings)
    first.manager.add_memory("Went climbing at the bouldering gym.", "episodic", 0.7)
    second = memory_factory(session_id="wed", lifecycle=settings)
    second.manager.add_memory("Climbing again tonight, bouldering is addictive.", "episodic", 0.7)
    report = second.manager.reflect()
    assert report.method == "offline-heuristic" and report.insights
    [insight] = [i for i in insights_of(second) if "bouldering" in i.content]
    assert insight.content.startswith("[heuristic] ") and insight.metadata["method"] == "offline-heuristic"
    assert len(insight.metadata["source_ids"]) == 2


def test_insights_that_repeat_an_event_or_cite_nothing_are_dropped(memory_factory) -> None:
    reply = {
        "insights": [
            {"insight": "Bought new running shoes.", "sources": [3]},
            {"insight": "The user is preparing for a race.", "sources": []},
            {"insight": "The user trains for a half marathon.", "sources": [2]},
        ]
    }
    llm = ScriptedLLM(rules=[(REFLECTION, json.dumps(reply))])
    memory = memory_factory(llm=llm, lifecycle=LifecycleSettings(reflection_threshold=3.0, reflection_insights=3))
    stock(memory)
    memory.manager.reflect()
    assert [i.content for i in insights_of(memory)] == ["The user trains for a half marathon."]


def test_offline_heuristic_says_nothing_about_stop_words(memory_factory) -> None:
    settings = LifecycleSettings(reflection_threshold=1.0, offline_reflection=True)
    texts = ["I went home and keep going.", "We went out, keep it simple.", "They went away; keep calm."]
    for day, text in zip(["mon", "tue", "wed"], texts, strict=True):
        memory = memory_factory(session_id=day, lifecycle=settings)
        memory.manager.add_memory(text, "episodic", 0.7)
    memory.manager.reflect()
    assert not [i for i in insights_of(memory) if "'went'" in i.content or "'keep'" in i.content]
