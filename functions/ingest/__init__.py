"""The ingest Lambda function (handler: ``functions.ingest.handler.handler``)."""
