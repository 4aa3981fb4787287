"""Importance: the offline estimator, the LLM rating (Generative Agents prompt), reinforcement by access."""

from __future__ import annotations

import pytest
from lifecycle_llm import IMPORTANCE, ScriptedLLM

from llama_index_memory_hierarchy.lifecycle.importance import (
    IMPORTANCE_PROMPT,
    ImportanceEstimator,
    aestimate_importance,
    effective_importance,
)
from llama_index_memory_hierarchy.ranking.fusion import reinforcement
from llama_index_memory_hierarchy.types import MemoryItem


def test_offline_estimate_ranks_what_matters_above_small_talk() -> None:
    estimate = ImportanceEstimator().estimate
    poignant = estimate("I'm allergic to peanuts, please always remember that.")
    preference = estimate("I prefer dark mode in my editor.")
    event = estimate("I met Laura Chen at the Berlin conference on March 3rd.")
    mundane = estimate("the weather is fine")
    greeting = estimate("ok thanks")
    assert poignant > preference > mundane > greeting
    assert event > mundane
    assert greeting <= 0.15
    for value in (poignant, preference, event, mundane, greeting):
        assert 0.05 <= value <= 0.95


def test_features_explain_the_estimate() -> None:
    estimator = ImportanceEstimator()
    features = estimator.features("My favourite band is Radiohead and I love their 2007 album.")
    assert {"preference", "emotion", "named_entities"} <= set(features)
    assert estimator.estimate("My favourite band is Radiohead and I love their 2007 album.") == pytest.approx(
        min(estimator.base + sum(features.values()), 0.95), abs=1e-4
    )
    assert "question" in estimator.features("what time is it?")


async def test_llm_rating_uses_the_generative_agents_prompt_and_is_normalised() -> None:
    llm = ScriptedLLM(rules=[(IMPORTANCE, "8")])
    value, method = await aestimate_importance("My mother was taken to hospital today.", llm=llm)
    assert (value, method) == (pytest.approx(7 / 9, abs=1e-4), "llm")
    [prompt] = llm.prompts_with(IMPORTANCE)
    assert prompt == IMPORTANCE_PROMPT.format(memory="My mother was taken to hospital today.")
    assert "brushing teeth" in prompt and "college acceptance" in prompt

    json_llm = ScriptedLLM(rules=[(IMPORTANCE, '{"rating": 1}')])
    assert await aestimate_importance("I brushed my teeth.", llm=json_llm) == (0.0, "llm")


async def test_unusable_llm_reply_falls_back_to_the_offline_estimate() -> None:
    llm = ScriptedLLM(rules=[(IMPORTANCE, "I would rather not say")])
    value, method = await aestimate_importance("I'm allergic to peanuts.", llm=llm)
    assert method == "offline"
    assert value == ImportanceEstimator().estimate("I'm allergic to peanuts.")
    assert await aestimate_importance("I'm allergic to peanuts.") == (value, "offline")


def test_access_reinforces_importance_with_diminishing_returns() -> None:
    base = MemoryItem(content="a fact", importance=0.4)
    values = [effective_importance(base.model_copy(update={"access_count": n})) for n in (0, 1, 3, 10, 100)]
    assert values[0] == 0.4
    assert values == sorted(values) and len(set(values)) == len(values)
    assert values[-1] <= 0.4 + 0.6 * 0.25 + 1e-9  # bounded by the reinforcement strength
    assert values[2] - values[1] > values[4] - values[3]  # early recalls count most per recall
    assert reinforcement(0) == 0.0
    assert effective_importance(base.model_copy(update={"importance": 1.0, "access_count": 50})) == 1.0


def test_manager_estimate_uses_the_llm_only_when_configured(memory_factory) -> None:
    offline = memory_factory(user_id="u1")
    assert offline.manager.estimate_importance("I'm allergic to peanuts.") == ImportanceEstimator().estimate(
        "I'm allergic to peanuts."
    )
    llm = ScriptedLLM(rules=[(IMPORTANCE, "10")])
    online = memory_factory(user_id="u2", llm=llm)
    assert online.manager.estimate_importance("I'm allergic to peanuts.") == 1.0
    assert len(llm.prompts_with(IMPORTANCE)) == 1


async def test_a_local_model_gets_the_reply_schema_and_is_off_by_default(memory_factory) -> None:
    from llama_index.core.base.llms.types import CompletionResponse

    from llama_index_memory_hierarchy.lifecycle.importance import RATING_SCHEMA
    from llama_index_memory_hierarchy.llms.local import LocalLLM

    class RecordingLocal(LocalLLM):  # never loads a model: records what the lifecycle asks for
        async def acomplete(self, prompt: str, formatted: bool = False, **kwargs):
            self.generate_kwargs = dict(kwargs)
            return CompletionResponse(text='{"rating": 4}')

    local = RecordingLocal(model_path="/nonexistent.gguf")
    assert await aestimate_importance("I adopted a puppy.", llm=local) == (pytest.approx(3 / 9, abs=1e-4), "llm")
    assert local.generate_kwargs == {"json_schema": RATING_SCHEMA}
    assert (await aestimate_importance("x y z", llm=ScriptedLLM(rules=[(IMPORTANCE, "4")])))[1] == "llm"

    memory = memory_factory()  # no llm=, no Settings.llm: the bundled model is not used by default
    assert memory.manager.llm() is None and memory.manager.background_llm() is None
