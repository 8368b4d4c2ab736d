"""The local service: dev tokens, HTTP server, SQS stand-in, scheduler, embedded stores.

Everything here is for ``engram serve`` and the tests; nothing in AWS imports it.
"""
