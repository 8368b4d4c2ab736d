"""Behavioural memory: observations become facts that reinforce and decay."""
