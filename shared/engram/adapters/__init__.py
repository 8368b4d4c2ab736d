"""Adapters: concrete implementations of the domain's ports (Redis, in-memory, …).

Importing this package imports no client library; each adapter module imports its own.
"""
