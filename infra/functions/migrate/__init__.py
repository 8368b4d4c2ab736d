"""The deploy-time migration trigger."""
