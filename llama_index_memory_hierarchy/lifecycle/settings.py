"""``LifecycleSettings``: the tunables of the memory lifecycle, in one pydantic model.

Defaults suit a conversational agent: consolidation and reflection run on demand or when a
session ends, the running summary of a long conversation is bounded, and an LLM is used only
when one is configured (``llm=`` or ``Settings.llm``). The bundled local model is used for the
background tasks (consolidation, reflection, summaries) only with ``use_local_llm=True``: at
135M parameters it returns valid JSON (its output is schema-constrained) but its facts are
sparse and its summaries can be wrong, while the offline paths are deterministic and fast.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LifecycleSettings(BaseModel):
    """Settings of :class:`~llama_index_memory_hierarchy.lifecycle.manager.MemoryManager`."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # --- LLM use --------------------------------------------------------------------------------
    use_local_llm: bool = Field(
        default=False,
        description="Let consolidation, reflection and summaries fall back to the bundled local LLM "
        "when no llm= and no Settings.llm is given (routing and importance never do).",
    )
    llm_routing: bool = Field(default=True, description="Classify the tier of a memory with the LLM when one is set.")
    llm_importance: bool = Field(default=True, description="Rate importance with the LLM when one is set.")

    # --- importance -----------------------------------------------------------------------------
    access_reinforcement: float = Field(
        default=0.25, ge=0, le=1, description="Most importance that repeated access can add (saturating)."
    )
    access_saturation: float = Field(default=5.0, gt=0, description="Accesses that give ~63% of the reinforcement.")

    # --- consolidation --------------------------------------------------------------------------
    promote_min_importance: float = Field(
        default=0.6, ge=0, le=1, description="Working items at least this important move to episodic memory."
    )
    promote_min_repetitions: int = Field(
        default=2, ge=2, description="Working items said this many times (same words) move to episodic memory."
    )
    promote_min_accesses: int = Field(
        default=2, ge=1, description="Working items recalled this many times move to episodic memory."
    )
    distill_roles: tuple[str | None, ...] = Field(
        default=("user", None),
        description="Roles of episodic events distilled into facts (None: events that are not chat messages).",
    )
    distill_batch_size: int = Field(default=20, ge=1, le=200, description="Events per LLM distillation prompt.")
    distill_min_importance: float = Field(
        default=0.0, ge=0, le=1, description="Events below this importance are not distilled into facts."
    )
    consolidate_every_turns: int | None = Field(
        default=None,
        ge=1,
        description="Consolidate in the background after this many new messages (None: only on demand and "
        "at end_session()).",
    )

    # --- reflection -----------------------------------------------------------------------------
    reflection_threshold: float = Field(
        default=5.0, gt=0, description="Summed importance (0-1 each) of new events that triggers a reflection."
    )
    reflection_window: int = Field(default=100, ge=1, description="Most recent events a reflection reads.")
    reflection_insights: int = Field(default=3, ge=1, le=20, description="Insights asked for per reflection.")
    offline_reflection: bool = Field(
        default=False,
        description="Without an LLM, store clearly-labelled heuristic insights (recurring topics) instead of "
        "skipping the reflection.",
    )

    # --- conversation compression ------------------------------------------------------------------
    summary_token_limit: int = Field(
        default=400, ge=8, description="Most tokens of the running summary (capped at a third of the history budget)."
    )
    compression_target: float = Field(
        default=0.6,
        gt=0.1,
        le=1.0,
        description="After compressing, recent turns fill at most this share of the history budget left "
        "beside the summary (headroom so that the next turns need no new summary).",
    )

    # --- profile ----------------------------------------------------------------------------------
    profile_token_limit: int = Field(
        default=150, ge=0, description="Most tokens of the user profile section of the memory message (0: off)."
    )

    # --- forgetting -------------------------------------------------------------------------------
    forget_threshold: float = Field(default=0.3, ge=0, le=1, description="importance_based: forget below this.")
    forget_older_than_seconds: float = Field(default=30 * 86400, gt=0, description="time_based default age.")
    forget_keep: int = Field(default=1000, ge=0, description="capacity_based: items kept per durable tier.")
    forget_decay_threshold: float = Field(default=0.05, ge=0, le=1, description="decay: forget below this strength.")
    forget_half_life_hours: float | None = Field(
        default=None, gt=0, description="decay: half-life (None: the config's recency_half_life_hours)."
    )
