"""Application services the Lambda handlers call: one use case per route, over the domain
services and ports (no boto3, redis or psycopg here; ``engram.bootstrap`` wires adapters)."""
