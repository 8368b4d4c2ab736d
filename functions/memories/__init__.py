"""The memories Lambda function (handler: ``functions.memories.handler.handler``)."""
