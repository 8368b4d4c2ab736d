"""The v1 API's endpoints, one module per HTTP function (``engram.api.routes`` names each):
plain functions ``(engram.api.web.Request, *path_parameters) -> engram.api.web.Reply``."""
