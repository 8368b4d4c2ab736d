"""Team insights: what a team's users have in common, k-anonymous (docs/insights.md)."""
