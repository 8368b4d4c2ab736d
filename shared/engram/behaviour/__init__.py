"""Behavioural memory (seed 000): observations become facts that reinforce and decay."""
