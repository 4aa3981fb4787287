"""Entity resolution with the real bundled embeddings (MiniLM and E5, thresholds on the calibrated scale)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Sequence

import numpy as np
import pytest

from llama_index_memory_hierarchy.calibration import acalibration
from llama_index_memory_hierarchy.embeddings import EmbeddingService, resolve_embed_model
from llama_index_memory_hierarchy.entity_resolution import (
    EntityRegistry,
    EntityResolver,
    entity_id,
    normalize_name,
    normalize_type,
    tokens_conflict,
    types_compatible,
)
from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.extraction import USER_ENTITY


class Embed:
    """The embedding of names by one real model, with that model's similarity calibration."""

    def __init__(self, service: EmbeddingService) -> None:
        self.service = service
        self.calibration = asyncio.run(acalibration(service))

    async def __call__(self, names: Sequence[str]) -> np.ndarray:
        return await self.service.aembed_texts(list(names))


@pytest.fixture(scope="module", params=["minilm", "e5"])
def embed(request: pytest.FixtureRequest) -> Embed:
    return Embed(EmbeddingService(resolve_embed_model(request.param)))


def test_normalisation() -> None:
    assert normalize_name("  Alice   CHEN's ") == "alice chen"
    assert normalize_name("The Acme Corp.") == "acme corp"
    assert normalize_name("Ｐａｒｉｓ") == "paris"  # NFKC full-width
    assert normalize_type("GPE") == normalize_type("location") == "PLACE"
    assert types_compatible("PERSON", "ENTITY")
    assert not types_compatible("PERSON", "PLACE")


def test_ids_are_stable_across_processes() -> None:
    here = entity_id("u1", "alice chen")
    code = "from llama_index_memory_hierarchy.entity_resolution import entity_id; print(entity_id('u1', 'alice chen'))"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert here == there
    assert here.startswith("ent_")
    assert entity_id("u2", "alice chen") != here
    with pytest.raises(MemoryValidationError):
        entity_id("u1", "")


async def test_alice_alice_and_alice_chen_are_one(embed) -> None:
    registry = EntityRegistry("u1")
    resolver = EntityResolver()
    [alice] = await resolver.aresolve(registry, [("Alice", "PERSON")], embed, embed.calibration)
    [same, chen] = await resolver.aresolve(
        registry, [("alice", "PERSON"), ("Alice Chen", "PERSON")], embed, embed.calibration
    )
    assert same.id == alice.id == chen.id
    assert alice.name == "Alice Chen"  # the more specific name becomes the display name
    assert {"alice", "alice chen"} <= alice.aliases
    [acme, corp] = await resolver.aresolve(
        registry, [("Acme Corporation", "ORG"), ("Acme Corp", "ENTITY")], embed, embed.calibration
    )
    assert acme.id == corp.id  # embedding similarity alone
    [paris, london] = await resolver.aresolve(registry, [("Paris", "GPE"), ("London", "GPE")], embed, embed.calibration)
    assert paris.id != london.id
    assert len(registry) == 4


async def test_conflicting_evidence_keeps_entities_apart(embed) -> None:
    registry = EntityRegistry("u1")
    resolver = EntityResolver()
    chen, smith = await resolver.aresolve(
        registry, [("Alice Chen", "PERSON"), ("Alice Smith", "PERSON")], embed, embed.calibration
    )
    assert chen.id != smith.id
    [alice] = await resolver.aresolve(registry, [("Alice", "PERSON")], embed, embed.calibration)
    assert alice.id not in {chen.id, smith.id}  # ambiguous containment is no evidence
    [city] = await resolver.aresolve(registry, [("Paris", "GPE")], embed, embed.calibration)
    [person] = await resolver.aresolve(registry, [("Paris", "PERSON")], embed, embed.calibration)
    assert city.id != person.id  # same name, incompatible types
    [again] = await resolver.aresolve(registry, [("paris", "PERSON")], embed, embed.calibration)
    assert again.id == person.id
    kim, novak = await resolver.aresolve(
        registry, [("Alice Chen-Kim", "PERSON"), ("Alice Chen-Novak", "PERSON")], embed, embed.calibration
    )
    assert kim.id != novak.id  # similar embeddings, but each name has a word the other lacks
    assert tokens_conflict(frozenset({"alice", "kim"}), frozenset({"alice", "novak"}))
    assert not tokens_conflict(frozenset({"acme", "corp"}), frozenset({"acme", "corporation"}))
    assert not tokens_conflict(frozenset({"nyc"}), frozenset({"new", "york", "city"}))


async def test_user_entity_and_thresholds(embed) -> None:
    registry = EntityRegistry("u1")
    strict = EntityResolver(similarity_threshold=0.99, containment_threshold=0.99)
    user, alice, chen = await strict.aresolve(
        registry, [(USER_ENTITY, "PERSON"), ("Alice", "PERSON"), ("Alice Chen", "PERSON")], embed, embed.calibration
    )
    assert alice.id != chen.id  # the bar is configurable
    assert user.id == entity_id("u1", "user")
    assert registry.search("alice")[0].id == alice.id
    with pytest.raises(MemoryValidationError, match="similarity_threshold"):
        EntityResolver(similarity_threshold=0)
    with pytest.raises(MemoryValidationError):
        await strict.aresolve(registry, [("!!!", "ENTITY")], embed, embed.calibration)
