"""Routing a memory to a tier: the caller's choice wins; else an LLM classifier, else heuristics."""

from __future__ import annotations

import io

import pytest
from lifecycle_llm import ROUTING, ScriptedLLM
from PIL import Image

from llama_index_memory_hierarchy.errors import LLMReplyError, MemoryHierarchyError, MemoryValidationError
from llama_index_memory_hierarchy.lifecycle.routing import HeuristicRouter, allm_route, aroute, is_media
from llama_index_memory_hierarchy.types import MemoryType

CASES = [
    ("My sister Lena lives in Lisbon.", MemoryType.SEMANTIC),
    ("I prefer dark mode in my editor.", MemoryType.SEMANTIC),
    ("I am allergic to peanuts.", MemoryType.SEMANTIC),
    ("Paris is the capital of France.", MemoryType.SEMANTIC),
    ("I love sushi", MemoryType.SEMANTIC),
    ("Yesterday I met Tom at the cinema.", MemoryType.EPISODIC),
    ("Last week we went hiking in the Alps.", MemoryType.EPISODIC),
    ("The meeting got moved to 3pm on Monday", MemoryType.EPISODIC),
    ("Remind me to call mom in 10 minutes.", MemoryType.WORKING),
    ("For now, focus on the login bug.", MemoryType.WORKING),
    ("Here is the photo: /tmp/holiday/cat.jpg", MemoryType.PERCEPTUAL),
    ("hmm ok", MemoryType.EPISODIC),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_heuristics(text: str, expected: MemoryType) -> None:
    decision = HeuristicRouter().classify(text)
    assert decision.memory_type is expected, decision
    assert decision.method == "heuristic" and decision.scores


def png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 24), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


async def test_media_goes_to_perceptual_without_asking_the_llm(tmp_path) -> None:
    llm = ScriptedLLM(rules=[(ROUTING, '{"memory_type": "semantic"}')])
    path = tmp_path / "red.png"
    path.write_bytes(png())
    for content in (png(), path, str(path)):
        assert is_media(content)
        decision = await aroute(content, llm=llm)
        assert (decision.memory_type, decision.method) == (MemoryType.PERCEPTUAL, "media")
    assert llm.prompts == []
    assert not is_media("a sentence that mentions red.png but is not a file")


async def test_llm_classifier_and_fallback() -> None:
    llm = ScriptedLLM(rules=[(ROUTING, 'Sure! {"memory_type": "working", "reason": "a task for now"}')])
    decision = await aroute("Paris is the capital of France.", llm=llm)
    assert (decision.memory_type, decision.method, decision.reason) == (MemoryType.WORKING, "llm", "a task for now")
    assert "Paris is the capital of France." in llm.prompts_with(ROUTING)[0]
    broken = ScriptedLLM(rules=[(ROUTING, '{"memory_type": "long-term"}')])
    decision = await aroute("Paris is the capital of France.", llm=broken)
    assert (decision.memory_type, decision.method) == (MemoryType.SEMANTIC, "heuristic")


def test_add_memory_routes_and_the_callers_choice_wins(memory_factory) -> None:
    llm = ScriptedLLM(rules=[(ROUTING, '{"memory_type": "episodic"}'), ("poignancy", "5")])
    memory = memory_factory(llm=llm)
    manager = memory.manager
    routed = manager.add_memory("I prefer tea over coffee.")  # the LLM says episodic
    assert memory.episodic.get(routed) is not None
    assert memory.episodic.get(routed).metadata["lifecycle"] == {"routed_by": "llm", "importance_by": "llm"}
    asked = len(llm.prompts_with(ROUTING))
    explicit = {t: manager.add_memory(f"note for the {t.value} tier", memory_type=t) for t in MemoryType}
    assert len(llm.prompts_with(ROUTING)) == asked  # an explicit type is never second-guessed
    for memory_type, memory_id in explicit.items():
        tier = memory.tiers([memory_type])[0]
        assert tier.get(memory_id) is not None, memory_type
        assert tier.get(memory_id).metadata["lifecycle"]["routed_by"] == "caller"
    fixed = manager.add_memory("I prefer tea.", memory_type="semantic", importance=0.9)
    assert memory.semantic.get(fixed).importance == 0.9
    assert memory.semantic.get(fixed).metadata["lifecycle"]["importance_by"] == "caller"


def test_add_memory_offline_routing_and_media(memory_factory, tmp_path) -> None:
    memory = memory_factory()
    manager = memory.manager
    fact = manager.add_memory("My favourite colour is teal.")
    event = manager.add_memory("Yesterday I visited the Louvre with Sam.")
    task = manager.add_memory("Remind me to water the plants in 20 minutes.")
    picture = manager.add_memory(png(), caption="a red square drawn for the test")
    assert memory.semantic.get(fact) is not None
    assert memory.episodic.get(event) is not None
    assert memory.working.get(task) is not None
    stored = memory.perceptual.get(picture)
    assert stored is not None and stored.metadata["modality"] == "image"
    assert manager.classify("I prefer tea.").memory_type is MemoryType.SEMANTIC
    with pytest.raises(MemoryValidationError, match="memory_type"):
        manager.add_memory("x", memory_type="long_term")
    with pytest.raises(MemoryValidationError, match="content"):
        manager.add_memory(png(), memory_type="semantic")
    with pytest.raises(MemoryValidationError, match="content"):
        manager.add_memory("   ")
    with pytest.raises(MemoryValidationError, match="importance"):
        manager.add_memory("a fact", importance=3)


async def test_an_unusable_reply_is_still_a_value_error_and_under_the_root() -> None:
    broken = ScriptedLLM(rules=[(ROUTING, '{"memory_type": "long-term"}')])
    with pytest.raises(ValueError) as caught:  # the except clauses written before the root still catch it
        await allm_route(broken, "remind me in 10 minutes")
    assert isinstance(caught.value, LLMReplyError) and isinstance(caught.value, MemoryHierarchyError)
