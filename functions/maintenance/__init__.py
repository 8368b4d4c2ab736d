"""The scheduled maintenance function (EventBridge)."""
