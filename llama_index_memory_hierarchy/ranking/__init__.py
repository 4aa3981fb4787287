"""Pure ranking helpers of the cross-tier search: selection (dedup, diversity) and context assembly."""
