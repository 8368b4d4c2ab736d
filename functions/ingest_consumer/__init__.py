"""The ingest_consumer Lambda function (handler: ``functions.ingest_consumer.handler.handler``)."""
