"""Perceptual memory: images, audio, video and text files, stored and searched by modality.

The tier (:mod:`.tier`) stands on helpers that never import it: :mod:`.settings`,
:mod:`.intake` (inputs staged as files), :mod:`.captions` (the searchable text),
:mod:`.records` (a perception and its satellite vector records), :mod:`.search` (every
signal, fused by reciprocal rank) and :mod:`.llm_context` (perceptions in a prompt).
"""

from llama_index_memory_hierarchy.messages import describe_perception
from llama_index_memory_hierarchy.tiers.perceptual.records import (
    MATCH_KEYS,
    RESERVED_KEYS,
    VECTOR_NAMESPACE,
    satellite_id,
)
from llama_index_memory_hierarchy.tiers.perceptual.settings import PerceptionSettings
from llama_index_memory_hierarchy.tiers.perceptual.tier import PerceptualMemory

__all__ = [
    "MATCH_KEYS",
    "RESERVED_KEYS",
    "VECTOR_NAMESPACE",
    "PerceptionSettings",
    "PerceptualMemory",
    "describe_perception",
    "satellite_id",
]
