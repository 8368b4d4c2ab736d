"""Forward-only SQL migrations, shipped as package data (``NNNN_name.sql``)."""
