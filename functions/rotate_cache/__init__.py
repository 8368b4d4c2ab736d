"""The cache secret rotation function (handler: ``functions.rotate_cache.handler.handler``)."""
