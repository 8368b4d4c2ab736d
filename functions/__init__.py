"""Lambda functions: thin handlers over ``engram`` (parse -> one use case -> respond)."""
