"""The v1 HTTP API surface: models, error mapping and identity (no handlers live here)."""
