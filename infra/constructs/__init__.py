"""The Engram CDK app's building blocks, one module per concern (``infra.constructs``, not the
``constructs`` library).

Two kinds:

* reusable constructs (``EngramFunction``, ``QueueWithDlq``), each a ``Construct`` of its own;
* the concerns a stack composes: identity, queues, domain events, functions, schedules,
  migration, cache rotation and the HTTP API (service); database and cache (data); alarms and
  dashboard (monitoring). Each takes the stack as ``scope`` and keyword-only arguments (stage
  values from ``infra.config``, and the resources of other concerns it uses), and builds its
  resources directly in that scope instead of under a child construct. A construct's path
  decides its logical id and some generated names (Lambda permission ids of EventBridge
  targets, rotation function names), so grouping code must not add a path segment: a new
  segment would rename, and so replace, deployed resources. ``tests/infrastructure/
  test_logical_ids.py`` holds every stage's logical ids to the ones deployed.
"""
