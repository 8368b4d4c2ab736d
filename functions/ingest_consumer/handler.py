"""The ingest consumer: SQS (one observation per message) -> Redis, with partial batch
responses. Recording is idempotent by observation id, so a redelivered message adds nothing;
a record that cannot be stored (Redis down: ``Unavailable``) is reported in
``batchItemFailures`` and SQS redelivers only that record.
"""

# Heavy or optional dependencies are imported where used, so importing this module is cheap.

from __future__ import annotations

from typing import Any

from engram.adapters.observability import SQS_MESSAGE_ID, instrument
from engram.behaviour.models import Observation

_processor: list[Any] = []


def record_observation(record: Any) -> int:
    """Store the observation one SQS record carries; returns 1 if new, 0 if a redelivery."""
    from engram.bootstrap import get_container

    body = record.body if hasattr(record, "body") else record["body"]
    observation = Observation.model_validate_json(body)
    return get_container().behaviour.record(observation.identity_id, [observation])


def _batch_processor() -> Any:
    if not _processor:
        from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType

        # every record failed -> report each one (SQS retries them) instead of raising
        _processor.append(
            BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        )
    return _processor[0]


@instrument(correlation_id_path=SQS_MESSAGE_ID)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from aws_lambda_powertools.utilities.batch import process_partial_response

    result = process_partial_response(
        event=event,
        record_handler=record_observation,
        processor=_batch_processor(),
        context=context,
    )
    return dict(result)
