"""The events function: publishes the event outbox (EventBridge schedule, every minute)."""
