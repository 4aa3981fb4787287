"""The four memory tiers: working, episodic, semantic, perceptual."""
