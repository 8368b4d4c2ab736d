"""Explicit memories (seed 003): scoped key/value memories with hybrid recall."""
