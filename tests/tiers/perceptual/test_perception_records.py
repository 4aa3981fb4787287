"""A perception's records and text, built without stores: satellites per space, content by source."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.perception.encoders import PHashEncoder
from llama_index_memory_hierarchy.perception.files import FileRef
from llama_index_memory_hierarchy.perception.media import MediaInfo, Modality
from llama_index_memory_hierarchy.tiers.perceptual.captions import auto_description, given_text
from llama_index_memory_hierarchy.tiers.perceptual.intake import as_source
from llama_index_memory_hierarchy.tiers.perceptual.records import VECTOR_NAMESPACE, perception_records, satellite_id
from llama_index_memory_hierarchy.types import MemoryType

INFO = MediaInfo(
    modality=Modality.IMAGE, ext="png", mime_type="image/png", metadata={"width": 64, "height": 48, "format": "PNG"},
    phash="8f373714acfcf4d0",
)  # fmt: skip
REF = FileRef(mode="stored", sha256="ab" * 32, size=1234, ext="png", ref="u/ab.png", filename="sea_view.png")


def test_satellite_ids_are_stable_and_one_per_space() -> None:
    assert satellite_id("p1", "phash-64") == satellite_id("p1", "phash-64")
    assert len({satellite_id("p1", "phash-64"), satellite_id("p1", "clip-512"), satellite_id("p2", "phash-64")}) == 3


def test_a_perception_is_one_memory_record_and_a_satellite_per_vector() -> None:
    encoder = PHashEncoder()
    vectors = {encoder.space: (encoder, encoder.vector(INFO.phash))}
    records = perception_records(
        user_id="alice", session_id="s1", info=INFO, ref=REF, content="the sea", source="given",
        text_space="text-384", vectors=vectors, extra={"album": "holiday"}, when=None, importance=0.7,
    )  # fmt: skip
    main, satellite = records
    assert main.item.memory_type is MemoryType.PERCEPTUAL and main.item.content == "the sea"
    meta = main.item.metadata
    assert meta["album"] == "holiday" and meta["phash"] == INFO.phash and meta["filename"] == "sea_view.png"
    assert meta["encoders"] == {"caption_text": "text-384", encoder.signal: encoder.space}
    assert satellite.namespace == VECTOR_NAMESPACE and satellite.space == encoder.space
    assert satellite.item.id == satellite_id(main.item.id, encoder.space)
    assert satellite.item.metadata["perception_id"] == main.item.id
    assert np.array_equal(satellite.embedding, vectors[encoder.space][1])


def test_the_text_of_a_perception_says_where_it_came_from() -> None:
    assert given_text("a cat", None) == ("a cat", "given")
    assert given_text(None, "hello there") == ("hello there", "transcript")
    assert given_text("a cat", "meow") == ("a cat\nTranscript: meow", "given")
    assert given_text(None, None) is None
    assert auto_description(INFO, REF) == "image, 'sea_view.png' (sea view), 64x48, PNG"


def test_a_string_is_a_path_or_text_only_when_asked() -> None:
    assert as_source(b"raw", None, "x.bin") == (b"raw", "x.bin", False)
    assert as_source("just words", Modality.TEXT, None) == (b"just words", None, False)
    with pytest.raises(MemoryValidationError, match="no file at"):
        as_source("/no/such/file.png", None, None)
