"""Does behavioural memory learn? A seeded simulator of users living through weeks of sessions.

- ``world``: the hidden truth — catalogue, user profiles, schedules, changes of habit — and
  what the true profile says each fact should be (pure, seeded);
- ``engine``: drives Engram through its session and events use cases (``Engram`` port) and
  ranks tools through a ``ToolRanker`` port, logging what every session saw;
- ``metrics``: top-1 / NDCG@5 with and without memory, prompt precision / recall, adaptation,
  flaky-tool episodes, bootstrap intervals over users;
- ``experiment``: one world against every decay × boost configuration;
- ``report``: the section and figures of ``bench/REPORT.md``.

``bench/bench_behaviour.py`` runs it from ``make bench``; docs/behaviour.md has the results and
the decisions they support.
"""
