"""The session Lambda function (handler: ``functions.session.handler.handler``)."""
