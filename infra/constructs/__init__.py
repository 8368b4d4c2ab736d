"""Reusable constructs of the Engram CDK app (``infra.constructs``, not the ``constructs`` lib)."""
