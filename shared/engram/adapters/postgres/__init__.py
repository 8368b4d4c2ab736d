"""PostgreSQL adapters (psycopg 3): pool, migrations, the memory store."""
