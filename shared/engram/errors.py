"""Domain errors. Handlers map them to HTTP in one place (see ``engram.api.errors``)."""

from __future__ import annotations

from typing import Any


class EngramError(Exception):
    """Base class of every error the domain raises on purpose."""

    code: str = "internal"

    def __init__(self, message: str, *, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidInput(EngramError):
    """Bad input. ``field`` names what was wrong (dotted path, e.g. ``observations.0.type``)."""

    code = "invalid_input"

    def __init__(self, field: str, message: str, *, details: Any = None) -> None:
        super().__init__(f"{field}: {message}", details=details)
        self.field = field


class IdempotencyKeyReused(InvalidInput):
    """An ``Idempotency-Key`` already named a request with another body (422)."""

    code = "idempotency_key_reused"

    def __init__(self, message: str) -> None:
        super().__init__("Idempotency-Key", message)


class InvalidHeader(EngramError):
    """A header the service cannot read as one value (400). ``field`` names the header."""

    code = "invalid_header"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class NotFound(EngramError):
    """The object does not exist, or the caller may not know that it does."""

    code = "not_found"


class Forbidden(EngramError):
    """A known caller is not allowed to do this."""

    code = "forbidden"


class Unauthorized(EngramError):
    """No identity, or an identity that could not be verified."""

    code = "unauthorized"


class MemoryDisabled(Forbidden):
    """Memory is switched off globally, for the team, or for the persona."""

    code = "memory_disabled"


class Conflict(EngramError):
    code = "conflict"


class PreconditionFailed(EngramError):
    """The object changed since the caller read it (an ``If-Match`` that no longer matches):
    nothing was changed."""

    code = "precondition_failed"


class RateLimited(EngramError):
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: int, details: Any = None) -> None:
        super().__init__(message, details=details)
        self.retry_after_s = retry_after_s


class QuotaExceeded(RateLimited):
    code = "quota_exceeded"


class Unavailable(EngramError):
    """A dependency could not durably accept a write (Redis, PostgreSQL, SQS)."""

    code = "unavailable"
