"""Similarity calibration with the real bundled models: one threshold means the same for MiniLM and E5."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from llama_index_memory_hierarchy.calibration import IDENTITY, SimilarityCalibration, acalibration, group_of
from llama_index_memory_hierarchy.embeddings import EmbeddingService
from llama_index_memory_hierarchy.entity_resolution import EntityRegistry, EntityResolver
from llama_index_memory_hierarchy.ranking.selection import NEAR_DUPLICATE_SIMILARITY, Choice, select


@pytest.fixture(scope="module", params=["minilm", "e5"])
def service(request: pytest.FixtureRequest) -> EmbeddingService:
    return EmbeddingService(request.param)


def test_groups_follow_the_script() -> None:
    assert group_of("我喜欢吃辣的川菜") == "zh"
    assert group_of("I like spicy food") == "en"
    assert group_of("我在学Python") == "zh"
    assert group_of("ok") == "en"


def test_scale_maps_the_baseline_to_zero_and_identity_to_one() -> None:
    cal = SimilarityCalibration("m-4", {("passage", "en", "en"): 0.8, ("name", "en", "zh"): 0.5})
    assert cal.calibrate(0.8) == pytest.approx(0.0)
    assert cal.calibrate(1.0) == pytest.approx(1.0)
    assert cal.calibrate(0.9) == pytest.approx(0.5)
    assert cal.cosine_at(0.5) == pytest.approx(0.9)
    assert cal.baseline("zh", "en", role="name") == 0.5  # a pair reads the same both ways
    assert np.allclose(cal.calibrate(np.array([0.8, 1.0])), [0.0, 1.0])
    degenerate = SimilarityCalibration("d-4", {("passage", "en", "en"): 1.0})
    assert np.isfinite(degenerate.calibrate(0.99))  # a model with every text on one vector cannot divide by 0
    assert IDENTITY.calibrate(0.42) == pytest.approx(0.42)


async def test_unrelated_texts_read_zero_and_paraphrases_high_for_every_model(service: EmbeddingService) -> None:
    cal = await acalibration(service)
    assert cal is await acalibration(service)  # measured once per model, cached by its space id
    assert cal.space == service.space
    vectors = await service.aembed_texts(
        [
            "I like spicy Sichuan food.",
            "I love spicy Sichuan dishes.",
            "The dentist moved my appointment to Thursday.",
        ]
    )
    paraphrase = cal.calibrate(float(vectors[0] @ vectors[1]))
    unrelated = cal.calibrate(float(vectors[0] @ vectors[2]))
    assert paraphrase > 0.8
    assert abs(unrelated) < 0.35
    query = await service.aembed_query("What food do I like?")
    assert cal.calibrate(float(query @ vectors[0]), role="query") > cal.calibrate(
        float(query @ vectors[2]), role="query"
    )


async def test_e5_baselines_differ_from_minilm_and_by_language() -> None:
    minilm = await acalibration(EmbeddingService("minilm"))
    e5 = await acalibration(EmbeddingService("e5"))
    assert minilm.baseline() < 0.2 < 0.6 < e5.baseline()  # the narrow cosine band of E5
    assert e5.baseline("zh", "zh") > e5.baseline("en", "en")  # Chinese texts sit closer together in E5
    assert minilm.baseline(role="name") > minilm.baseline()  # short names closer than sentences


async def test_entity_thresholds_hold_for_e5(service: EmbeddingService) -> None:
    """Under E5, Paris and Berlin have cosine ~0.88 (MiniLM's old raw bar): calibrated, they stay two places."""
    cal = await acalibration(service)

    async def embed(names: Sequence[str]) -> np.ndarray:
        return await service.aembed_texts(list(names))

    registry = EntityRegistry("u1")
    resolver = EntityResolver()
    [paris] = await resolver.aresolve(registry, [("Paris", "GPE")], embed, cal)
    [berlin, again] = await resolver.aresolve(registry, [("Berlin", "GPE"), ("paris", "GPE")], embed, cal)
    assert berlin.id != paris.id and again.id == paris.id
    [acme] = await resolver.aresolve(registry, [("Acme Corporation", "ORG")], embed, cal)
    [corp] = await resolver.aresolve(registry, [("Acme Corp", "ORG")], embed, cal)
    assert corp.id == acme.id


async def test_near_duplicates_collapse_on_the_calibrated_scale(service: EmbeddingService) -> None:
    """A reordered sentence is one memory; two managers are two, though E5 puts them at raw cosine 0.96."""
    cal = await acalibration(service)
    texts = ["In May I moved to Berlin.", "I moved to Berlin in May.", "我的经理是李四。", "我的经理是王五。"]
    vectors = await service.aembed_texts(texts)
    choices = [
        Choice(key=str(i), score=1.0 - i / 10, words=frozenset({str(i)}), vector=v, group=group_of(t))
        for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
    ]
    kept = [c.key for c in select(choices, 4, calibration=cal)]
    assert kept == ["0", "2", "3"]
    assert cal.calibrate(float(vectors[2] @ vectors[3]), "zh", "zh") < NEAR_DUPLICATE_SIMILARITY
