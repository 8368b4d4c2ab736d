"""Explicit memories: scoped key/value memories with hybrid recall."""
