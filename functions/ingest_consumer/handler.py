"""The ingest consumer: SQS -> Redis, one store call per batch, partial batch responses.

A message carries one request's observations (or one chunk of them), or — the shape sent
before — one observation; both are accepted (``engram.use_cases.ingest_messages``). The batch
is grouped by identity and written with one ``BehaviourService.record_many`` call (one Redis
pipeline for all its identities, one per shard on a cluster). A message that cannot be
decoded, or whose identity could not be stored (Redis down: ``Unavailable``), is reported in
``batchItemFailures`` and SQS redelivers only those; recording is idempotent by observation
id, so a redelivered message adds nothing.
"""

# Heavy or optional dependencies are imported where used, so importing this module is cheap.

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from engram.adapters.observability import SQS_MESSAGE_ID, add_metric, instrument
from engram.use_cases.ingest_messages import BatchOutcome, store_batch

_log = logging.getLogger("engram.functions.ingest_consumer")
_processor: list[Any] = []


def store_records(records: Sequence[Any]) -> BatchOutcome:
    """Store the observations of SQS ``records`` (Powertools ``SQSRecord`` or raw dicts)."""
    from engram.bootstrap import get_container

    behaviour = get_container().behaviour
    messages = [
        (r.message_id, r.body) if hasattr(r, "body") else (r["messageId"], r["body"])
        for r in records
    ]
    return store_batch(behaviour.record_many, messages)


def _batch_processor() -> Any:
    """Powertools' SQS ``BatchProcessor`` with the whole batch handled at once: the records
    are grouped by identity (one store call each) instead of handled one by one, and each
    record is then reported a success or a failure, which Powertools turns into the partial
    batch response."""
    if _processor:
        return _processor[0]
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    class GroupedBatchProcessor(BatchProcessor):
        def process(self) -> list[tuple[Any, ...]]:
            records = [SQSRecord(r) for r in self.records]
            outcome: BatchOutcome = self.handler(records)
            add_metric("ObservationsStored", outcome.stored)
            results: list[tuple[Any, ...]] = []
            for record in records:
                error = outcome.failed.get(record.message_id)
                if error is None:
                    results.append(self.success_handler(record, None))
                else:
                    info = (type(error), error, error.__traceback__)
                    results.append(self.failure_handler(record, info))
            if outcome.failed:
                kinds = sorted({type(e).__name__ for e in outcome.failed.values()})
                _log.warning(
                    "%d of %d record(s) failed: %s", len(outcome.failed), len(records), kinds
                )
            return results

    # every record failed -> report each one (SQS retries them) instead of raising
    _processor.append(
        GroupedBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    )
    return _processor[0]


@instrument(correlation_id_path=SQS_MESSAGE_ID)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from aws_lambda_powertools.utilities.batch import process_partial_response

    result = process_partial_response(
        event=event,
        record_handler=store_records,
        processor=_batch_processor(),
        context=context,
    )
    return dict(result)
