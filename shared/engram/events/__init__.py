"""Domain events: what happened to a memory, a user or a team's settings, as ids and metadata."""
