"""Pure ranking below the tiers: fusion and scores (``fusion``), the keyword/dense recipe (``pipeline``),
selection (dedup, diversity) and context assembly (``context``)."""
