"""The procedural tier: standing instructions and learned procedures (see :mod:`.tier`)."""

from llama_index_memory_hierarchy.tiers.procedural.runs import Run, RunTracker, Step
from llama_index_memory_hierarchy.tiers.procedural.tier import (
    INSTRUCTION,
    INSTRUCTIONS_HEADER,
    MEMORY_TOOLS,
    PROCEDURE,
    ProceduralMemory,
    ProceduralSettings,
    instructions_section,
    is_current,
    procedural_evidence,
    procedure_text,
    rule_sources,
)

__all__ = [
    "INSTRUCTION",
    "INSTRUCTIONS_HEADER",
    "MEMORY_TOOLS",
    "PROCEDURE",
    "ProceduralMemory",
    "ProceduralSettings",
    "Run",
    "RunTracker",
    "Step",
    "instructions_section",
    "is_current",
    "procedural_evidence",
    "procedure_text",
    "rule_sources",
]
