"""The decision: the one door (``decide``), the continuous and micro-batch planners and what they size with."""
