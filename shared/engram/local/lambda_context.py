"""What the local service hands a Lambda handler besides its event: a context with the
attributes handlers and Powertools read (request id, function name, remaining time)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: A Lambda handler: ``handler(event, context) -> response``.
LambdaHandler = Callable[[dict[str, Any], Any], Any]


@dataclass
class FakeLambdaContext:
    """What handlers and Powertools read from a Lambda context."""

    function_name: str = "engram-local"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 1024
    timeout_ms: int = 30_000
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/engram-local"
    log_stream_name: str = "local"
    _deadline: float = field(default_factory=lambda: time.monotonic() + 30.0)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))
