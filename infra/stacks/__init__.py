"""The four stacks of one Engram stage: network, data, service, monitoring."""
